package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/postgres"
)

// A like is a row in the application's own table plus one on the post's
// like counter. AddTx puts both in one transaction: a like counts exactly
// when its row commits, and a repeated like rolls back its count with it.
func ExampleCounterStore_AddTx() {
	ctx := context.Background()
	store, err := postgres.Open(ctx, os.Getenv("DATABASE_URL"), postgres.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	db := store.Pool()

	if _, err := db.Exec(ctx, `CREATE TABLE IF NOT EXISTS likes (
		post text, user_id text, PRIMARY KEY (post, user_id))`); err != nil {
		log.Fatal(err)
	}
	if _, err := store.CreateCounter(ctx, "post/42/likes", shardcounter.Spec{Shards: 16}); err != nil && !errors.Is(err, shardcounter.ErrExists) {
		log.Fatal(err)
	}

	like := func(user string) error {
		return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO likes (post, user_id) VALUES ($1, $2)", "42", user); err != nil {
				return err
			}
			return store.AddTx(ctx, tx, "post/42/likes", 1, rand.Uint64())
		})
	}
	for _, user := range []string{"ada", "grace", "ada"} {
		var pe *pgconn.PgError
		if err := like(user); errors.As(err, &pe) && pe.Code == "23505" {
			fmt.Printf("%s already likes post 42\n", user)
		} else if err != nil {
			log.Fatal(err)
		}
	}

	r, err := store.ReadCounter(ctx, "post/42/likes")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("likes:", r.Value)
	// Output:
	// ada already likes post 42
	// likes: 2
}
