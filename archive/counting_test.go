package archive_test

import (
	"context"
	"errors"
	"io"
	"sync"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	"gocloud.dev/gcerrors"
)

// counting is a bucket driver over another bucket that counts what the
// archive asks of it: the prefixes it lists, the objects it reads and
// their bytes.
type counting struct {
	b *blob.Bucket

	mu        sync.Mutex
	lists     []string // the prefix of each listed page
	listed    int      // objects (not folders) listed
	reads     []string // the key of each read
	readBytes int64
}

// countingBucket is b behind a counting driver.
func countingBucket(b *blob.Bucket) (*blob.Bucket, *counting) {
	c := &counting{b: b}
	return blob.NewBucket(c), c
}

// reset forgets what was counted.
func (c *counting) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lists, c.listed, c.reads, c.readBytes = nil, 0, nil, 0
}

func (c *counting) ErrorCode(err error) gcerrors.ErrorCode { return gcerrors.Code(err) }
func (c *counting) As(any) bool                            { return false }
func (c *counting) ErrorAs(error, any) bool                { return false }

func (c *counting) Attributes(ctx context.Context, key string) (*driver.Attributes, error) {
	a, err := c.b.Attributes(ctx, key)
	if err != nil {
		return nil, err
	}
	return &driver.Attributes{ContentType: a.ContentType, Metadata: a.Metadata, ModTime: a.ModTime, Size: a.Size, MD5: a.MD5, ETag: a.ETag}, nil
}

func (c *counting) ListPaged(ctx context.Context, opts *driver.ListOptions) (*driver.ListPage, error) {
	token := opts.PageToken
	if token == nil {
		token = blob.FirstPageToken
	}
	size := opts.PageSize
	if size <= 0 {
		size = 1000
	}
	objects, next, err := c.b.ListPage(ctx, token, size, &blob.ListOptions{Prefix: opts.Prefix, Delimiter: opts.Delimiter})
	if err != nil && err != io.EOF {
		return nil, err
	}
	c.mu.Lock()
	c.lists = append(c.lists, opts.Prefix)
	page := &driver.ListPage{NextPageToken: next}
	for _, o := range objects {
		if !o.IsDir {
			c.listed++
		}
		page.Objects = append(page.Objects, &driver.ListObject{Key: o.Key, ModTime: o.ModTime, Size: o.Size, MD5: o.MD5, IsDir: o.IsDir})
	}
	c.mu.Unlock()
	return page, nil
}

func (c *counting) NewRangeReader(ctx context.Context, key string, offset, length int64, _ *driver.ReaderOptions) (driver.Reader, error) {
	r, err := c.b.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.reads = append(c.reads, key)
	c.mu.Unlock()
	return &countingReader{r: r, c: c}, nil
}

func (c *counting) NewTypedWriter(ctx context.Context, key, contentType string, opts *driver.WriterOptions) (driver.Writer, error) {
	return c.b.NewWriter(ctx, key, &blob.WriterOptions{ContentType: contentType, ContentMD5: opts.ContentMD5, Metadata: opts.Metadata, IfNotExist: opts.IfNotExist})
}

func (c *counting) Copy(ctx context.Context, dst, src string, _ *driver.CopyOptions) error {
	return c.b.Copy(ctx, dst, src, nil)
}

func (c *counting) Delete(ctx context.Context, key string, _ *driver.DeleteOptions) error {
	return c.b.Delete(ctx, key)
}

func (c *counting) SignedURL(context.Context, string, *driver.SignedURLOptions) (string, error) {
	return "", errors.New("no signed URLs")
}

func (c *counting) Close() error { return c.b.Close() }

// countingReader counts the bytes read of an object.
type countingReader struct {
	r *blob.Reader
	c *counting
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.c.mu.Lock()
	r.c.readBytes += int64(n)
	r.c.mu.Unlock()
	return n, err
}

func (r *countingReader) Close() error { return r.r.Close() }
func (r *countingReader) As(any) bool  { return false }
func (r *countingReader) Attributes() *driver.ReaderAttributes {
	return &driver.ReaderAttributes{ContentType: r.r.ContentType(), ModTime: r.r.ModTime(), Size: r.r.Size()}
}
