#!/usr/bin/env python3
"""scripts/otlp-sink.py is the least OTLP/HTTP trace receiver, for
scripts/bench-trace.sh: it listens on 127.0.0.1 (an ephemeral port, which
it writes to PORTFILE), answers each POST /v1/traces of the protobuf
encoding with 200 and an empty ExportTraceServiceResponse, and appends a
line "SPANS BYTES" a request to LOG, so that the script can check that a
run's spans were exported, and how many. It runs in a process of its own
so that callgrind counts only what the exporter does.

    scripts/otlp-sink.py PORTFILE LOG
"""
import http.server
import sys


def fields(buf):
    """Yields (field number, wire type, value) of one protobuf message."""
    i = 0

    def varint():
        nonlocal i
        v = s = 0
        while True:
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << s
            s += 7
            if b < 0x80:
                return v

    while i < len(buf):
        key = varint()
        num, wire = key >> 3, key & 7
        if wire == 0:
            yield num, wire, varint()
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            n = varint()
            yield num, wire, buf[i:i + n]
            i += n
        else:
            raise ValueError("wire type %d" % wire)


def spans(body):
    """Counts the spans of an ExportTraceServiceRequest: resource_spans (1),
    their scope_spans (2), and those's spans (2)."""
    n = 0
    for num, wire, rs in fields(body):
        if num != 1 or wire != 2:
            continue
        for num, wire, ss in fields(rs):
            if num != 2 or wire != 2:
                continue
            n += sum(1 for num, wire, _ in fields(ss) if num == 2 and wire == 2)
    return n


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep the exporter's connection

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(sys.argv[2], "a") as log:
            log.write("%d %d\n" % (spans(body), len(body)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[1], "w") as f:
    f.write("%d\n" % srv.server_address[1])
srv.serve_forever()
