// Package archive keeps delivered events in object storage before
// retention removes them from the outbox, and reads them back for replay.
//
// An archive is a bucket (gocloud.dev/blob: local files, S3, in memory for
// tests) holding gzip-compressed NDJSON objects, one event a line, sorted
// by id, each named from its content:
//
//	events/YYYY/MM/DD/HH/<min id>_<max id>_<sha256 prefix>.ndjson.gz
//
// where YYYY/MM/DD/HH is the hour (UTC) in which its events were written
// (created_at): Keep writes one object for each hour its events were
// written in. Each object has a manifest entry, a small JSON document
// written only once the object is complete:
//
//	manifest/YYYY/MM/DD/HH/<min id>_<max id>_<sha256 prefix>.json
//
// Read lists the manifest of the hours a time window covers, opens only
// the objects that can hold an event it wants, checks each against its
// entry (size, SHA-256, count) and merges them in id order.
//
// A bucket write is atomic (the object is complete or absent) and an
// object's name comes from its content, so a Keep interrupted by a crash
// and called again with the same events writes the same objects, and an
// event archived twice (replayed, then delivered and retained again) is
// read once.
package archive

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"gocloud.dev/blob"

	"github.com/postbox-go/postbox/internal/redact"
)

// Archive is a bucket of archived events: compressed NDJSON objects, each
// with its manifest entry, so that a window is found without listing
// every object. Its methods may be called from several goroutines.
type Archive struct {
	bucket *blob.Bucket
	name   string
}

// Open opens the archive at a bucket URL, whose scheme's driver the
// program registered by importing it (the postbox command imports
// gocloud.dev/blob/fileblob and gocloud.dev/blob/s3blob):
// file:///path/to/dir, s3://bucket?region=eu-west-1 (credentials come from
// the AWS environment, never the URL), mem:// (gocloud.dev/blob/memblob,
// tests). The query parameter prefix (?prefix=outbox/) puts the archive
// under that prefix of the bucket. Open makes no network call: a bucket
// that cannot be reached fails the first Keep or Read.
func Open(ctx context.Context, bucketURL string) (*Archive, error) {
	u, err := url.Parse(bucketURL)
	if err != nil || u.Scheme == "" {
		// url.Parse's error repeats the URL, secrets and all.
		return nil, errors.New("archive: the bucket URL does not parse (want a URL such as file:///dir or s3://bucket?region=...)")
	}
	name := redact.URLAllowing(u, isPlainParam)
	b, err := blob.DefaultURLMux().OpenBucketURL(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("archive: open %s: %w", name, redact.ScrubURLAllowing(err, u, isPlainParam))
	}
	return &Archive{bucket: b, name: name}, nil
}

// New returns the archive in bucket, under prefix ("" for the whole
// bucket; a prefix usually ends with "/"), for a program that opens its
// bucket itself. The archive owns bucket: Close closes it.
func New(bucket *blob.Bucket, prefix string) *Archive {
	name := "a bucket"
	if prefix != "" {
		bucket = blob.PrefixedBucket(bucket, prefix)
		name += " under " + prefix
	}
	return &Archive{bucket: bucket, name: name}
}

// String describes the archive for logs, which say it is an archive: the
// bucket URL without its user information and with the values of its
// query parameters, other than those known to hold no secret, replaced by
// xxxxx ("s3://bucket?region=eu-west-1&token=xxxxx"); "a bucket" (under
// its prefix) for one made by New.
func (a *Archive) String() string { return a.name }

// Close closes the bucket.
func (a *Archive) Close() error { return a.bucket.Close() }

// plainParams are the bucket URL parameters (of gocloud's file and S3
// openers) whose values String shows: where the bucket is, never who opens
// it.
var plainParams = map[string]bool{
	"prefix": true, "region": true, "endpoint": true, "hostname_immutable": true,
	"use_path_style": true, "s3ForcePathStyle": true, "disable_https": true,
	"dualstack": true, "fips": true, "accelerate": true, "awssdk": true,
	"create_dir": true, "no_tmp_dir": true, "metadata": true, "dir_file_mode": true,
	"base_url": true, "anonymous": true, "rate_limiter_capacity": true,
	"ssetype": true, "request_checksum_calculation": true,
	"response_checksum_validation": true,
}

// isPlainParam reports whether a bucket URL parameter is in plainParams.
func isPlainParam(key string) bool { return plainParams[key] }
