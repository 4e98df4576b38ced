package main

// The bucket drivers of `postbox relay --archive` and `postbox replay
// --archive`: file:///dir and s3://bucket URLs. A program using package
// archive as a library registers the drivers it needs the same way.
import (
	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/s3blob"
)
