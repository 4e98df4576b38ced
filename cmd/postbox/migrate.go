package main

import (
	"context"
	"flag"
	"fmt"
)

func setupMigrate(fs *flag.FlagSet) func(context.Context) error {
	var db dbFlags
	db.register(fs)
	return func(ctx context.Context) error {
		s, err := db.open(ctx)
		if err != nil {
			return err
		}
		defer s.close()
		applied, err := s.Migrate(ctx)
		if err != nil {
			return err
		}
		if len(applied) == 0 {
			fmt.Println("schema is up to date")
			return nil
		}
		fmt.Printf("applied migrations %v\n", applied)
		return nil
	}
}
