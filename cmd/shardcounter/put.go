package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// putCommand is `shardcounter put NAME JSON|-`: JSON is one document's
// data; "-" reads documents from stdin, one JSON object a line (NDJSON),
// sent in batches of up to 500.
type putCommand struct {
	clientFlags
	id    string
	stdin io.Reader
}

func newPutCommand(m *Main) command {
	return &putCommand{clientFlags: clientFlags{m: m}, stdin: os.Stdin}
}

func (c *putCommand) flags(fs *flag.FlagSet) {
	c.register(fs)
	fs.StringVar(&c.id, "id", "", "the document's `ID` (default: generated); for one document only")
}

// parseData decodes one document's data: a JSON object, numbers kept
// exact.
func parseData(b []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var data map[string]any
	if err := d.Decode(&data); err != nil || data == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	if d.More() {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return data, nil
}

func (c *putCommand) run(ctx context.Context, args []string) error {
	if len(args) != 2 {
		return usagef("expected NAME and a JSON document, or NAME and - to read NDJSON from stdin; got %d arguments", len(args))
	}
	name := args[0]
	if err := checkArg("collection name", name); err != nil {
		return err
	}
	var docs []shardcounter.DocumentInput
	if args[1] == "-" {
		if c.id != "" {
			return usagef("--id names one document: leave it out when reading documents from stdin")
		}
		sc := bufio.NewScanner(c.stdin)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for line := 1; sc.Scan(); line++ {
			if len(bytes.TrimSpace(sc.Bytes())) == 0 {
				continue
			}
			data, err := parseData(sc.Bytes())
			if err != nil {
				return usagef("stdin line %d: %v: give one JSON object a line", line, err)
			}
			docs = append(docs, shardcounter.DocumentInput{Data: data})
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("reading stdin: %w", err)
		}
		if len(docs) == 0 {
			return usagef("stdin holds no documents: give one JSON object a line")
		}
	} else {
		data, err := parseData([]byte(args[1]))
		if err != nil {
			return usagef("document %v: give its data as one JSON object, e.g. '{\"symbol\":\"AAA\"}'", err)
		}
		if c.id != "" {
			if err := shardcounter.ValidateID("document id", c.id); err != nil {
				return usagef("--id: %s", shardcounter.ErrorMessage(err))
			}
		}
		docs = []shardcounter.DocumentInput{{ID: c.id, Data: data}}
	}
	client, err := c.client()
	if err != nil {
		return err
	}
	var refs []shardcounter.DocumentRef
	for start := 0; start < len(docs); start += shardcounter.MaxDocumentBatch {
		batch := docs[start:min(start+shardcounter.MaxDocumentBatch, len(docs))]
		r, err := client.PutDocuments(ctx, name, batch)
		if err != nil {
			if start > 0 {
				return fmt.Errorf("after %d documents were written: %s", start, errorText(collectionErr(err)))
			}
			return collectionErr(err)
		}
		refs = append(refs, r...)
	}
	if c.json {
		return c.printJSON(shttp.PutDocumentsResponse{Documents: refs})
	}
	for _, r := range refs {
		if _, err := fmt.Fprintf(c.m.Stdout, "put %s on shard %d at %s\n", r.ID, r.Shard, r.Timestamp.Format(time.RFC3339Nano)); err != nil {
			return err
		}
	}
	return nil
}
