// Package cdp is a small client of the Chrome DevTools Protocol, enough for
// the console's browser tests: launch a headless Chromium, open a page,
// navigate, evaluate JavaScript, take screenshots and notice JavaScript
// dialogs. It speaks to the browser over one websocket
// (golang.org/x/net/websocket), with flattened sessions for pages.
package cdp

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/websocket"
)

// Flags are the command line flags Launch starts Chromium with, besides
// the user data directory and the debugging port: headless, without a
// sandbox (containers), and without the background traffic of a new
// profile.
var Flags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
	"--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
	"--window-size=1280,900",
}

// Browser is a running Chromium and the connection to it.
type Browser struct {
	cmd    *exec.Cmd
	ws     *websocket.Conn
	nextID atomic.Int64
	exited chan struct{}

	mu      sync.Mutex
	pending map[int64]chan message
	dialogs []string
	closed  error
	stderr  []string
}

// message is one message of the protocol: an answer (ID) or an event
// (Method).
type message struct {
	ID        int64           `json:"id,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

var listening = regexp.MustCompile(`DevTools listening on (ws://\S+)`)

// Launch starts the Chromium at path with a fresh profile in userDataDir,
// and connects to it. The browser stops when Close is called or ctx is
// done.
func Launch(ctx context.Context, path, userDataDir string) (*Browser, error) {
	args := append([]string{"--user-data-dir=" + userDataDir, "--remote-debugging-port=0", "--remote-allow-origins=*"}, Flags...)
	cmd := exec.CommandContext(ctx, path, append(args, "about:blank")...)
	cmd.WaitDelay = 5 * time.Second
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cdp: start %s: %w", path, err)
	}
	b := &Browser{cmd: cmd, pending: map[int64]chan message{}, exited: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			b.mu.Lock()
			b.stderr = append(b.stderr, line)
			b.mu.Unlock()
			if m := listening.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	go func() {
		cmd.Wait()
		close(b.exited)
	}()
	var wsURL string
	select {
	case wsURL = <-found:
	case <-b.exited:
		return nil, fmt.Errorf("cdp: %s exited at start:\n%s", path, b.stderrText())
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		return nil, fmt.Errorf("cdp: %s did not say where DevTools listen within 30s:\n%s", path, b.stderrText())
	}
	b.ws, err = websocket.Dial(wsURL, "", "http://127.0.0.1/")
	if err != nil {
		cmd.Process.Kill()
		return nil, fmt.Errorf("cdp: connect to %s: %w", wsURL, err)
	}
	go b.read()
	return b, nil
}

func (b *Browser) stderrText() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.stderr, "\n")
}

// read dispatches answers to their callers and records dialogs (and
// dismisses them, so that the page goes on).
func (b *Browser) read() {
	for {
		var m message
		if err := websocket.JSON.Receive(b.ws, &m); err != nil {
			b.mu.Lock()
			b.closed = fmt.Errorf("cdp: connection closed: %w", err)
			for id, ch := range b.pending {
				close(ch)
				delete(b.pending, id)
			}
			b.mu.Unlock()
			return
		}
		if m.ID != 0 {
			b.mu.Lock()
			ch := b.pending[m.ID]
			delete(b.pending, m.ID)
			b.mu.Unlock()
			if ch != nil {
				ch <- m
			}
			continue
		}
		if m.Method == "Page.javascriptDialogOpening" {
			var d struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			}
			json.Unmarshal(m.Params, &d)
			b.mu.Lock()
			b.dialogs = append(b.dialogs, d.Type+": "+d.Message)
			b.mu.Unlock()
			go b.send(context.Background(), m.SessionID, "Page.handleJavaScriptDialog", map[string]any{"accept": false}, nil)
		}
	}
}

// Dialogs are the JavaScript dialogs (alert, confirm, prompt) any page
// opened so far.
func (b *Browser) Dialogs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.dialogs...)
}

// send calls method with params in a session ("" for the browser) and
// decodes its result into result (when not nil).
func (b *Browser) send(ctx context.Context, session, method string, params, result any) error {
	id := b.nextID.Add(1)
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	ch := make(chan message, 1)
	b.mu.Lock()
	if b.closed != nil {
		b.mu.Unlock()
		return b.closed
	}
	b.pending[id] = ch
	b.mu.Unlock()
	if err := websocket.JSON.Send(b.ws, message{ID: id, SessionID: session, Method: method, Params: raw}); err != nil {
		return fmt.Errorf("cdp: %s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return fmt.Errorf("cdp: %s: connection closed", method)
		}
		if m.Error != nil {
			return fmt.Errorf("cdp: %s: %s (%d)", method, m.Error.Message, m.Error.Code)
		}
		if result != nil {
			return json.Unmarshal(m.Result, result)
		}
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		delete(b.pending, id)
		b.mu.Unlock()
		return fmt.Errorf("cdp: %s: %w", method, ctx.Err())
	}
}

// Close closes the browser and waits for it to exit.
func (b *Browser) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = b.send(ctx, "", "Browser.close", struct{}{}, nil)
	b.ws.Close()
	select {
	case <-b.exited:
	case <-time.After(5 * time.Second):
		b.cmd.Process.Kill()
		<-b.exited
	}
}

// Page is one tab.
type Page struct {
	b       *Browser
	session string
}

// NewPage opens a blank tab.
func (b *Browser) NewPage(ctx context.Context) (*Page, error) {
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.send(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		return nil, err
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.send(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
		return nil, err
	}
	p := &Page{b: b, session: attached.SessionID}
	for _, domain := range []string{"Page.enable", "Runtime.enable"} {
		if err := b.send(ctx, p.session, domain, struct{}{}, nil); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Eval evaluates a JavaScript expression in the page (awaiting a promise)
// and decodes its value into out (when not nil).
func (p *Page) Eval(ctx context.Context, expr string, out any) error {
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	err := p.b.send(ctx, p.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &res)
	if err != nil {
		return err
	}
	if e := res.ExceptionDetails; e != nil {
		return fmt.Errorf("cdp: %s: %s %s", expr, e.Text, e.Exception.Description)
	}
	if out == nil || len(res.Result.Value) == 0 {
		return nil
	}
	return json.Unmarshal(res.Result.Value, out)
}

// WaitFor evaluates expr until it is true, or ctx is done.
func (p *Page) WaitFor(ctx context.Context, expr string) error {
	for {
		var ok bool
		err := p.Eval(ctx, "Boolean("+expr+")", &ok)
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("cdp: waiting for %s: %w (last: %v)", expr, ctx.Err(), err)
			}
			return fmt.Errorf("cdp: waiting for %s: %w", expr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// oldDocument marks the document in the page, so that a wait can tell
// the next document from it.
const oldDocument = "window.__cdpOldDocument"

// Navigate loads url and waits until the new document has loaded.
func (p *Page) Navigate(ctx context.Context, url string) error {
	return p.loadsNew(ctx, func() error {
		var nav struct {
			ErrorText string `json:"errorText"`
		}
		if err := p.b.send(ctx, p.session, "Page.navigate", map[string]any{"url": url}, &nav); err != nil {
			return err
		}
		if nav.ErrorText != "" {
			return fmt.Errorf("cdp: navigate to %s: %s", url, nav.ErrorText)
		}
		return nil
	})
}

// ClickAndWait clicks the element selector finds, which loads another
// document (a link, a form's button), and waits until it has loaded.
func (p *Page) ClickAndWait(ctx context.Context, selector string) error {
	return p.loadsNew(ctx, func() error { return p.Click(ctx, selector) })
}

// Click clicks the element selector finds.
func (p *Page) Click(ctx context.Context, selector string) error {
	sel, _ := json.Marshal(selector)
	var found bool
	if err := p.Eval(ctx, fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (!e) return false; e.click(); return true; })()`, sel), &found); err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("cdp: click: nothing matches %s", selector)
	}
	return nil
}

// loadsNew marks the document, runs act, and waits for a new document to
// have loaded.
func (p *Page) loadsNew(ctx context.Context, act func() error) error {
	if err := p.Eval(ctx, oldDocument+" = true", nil); err != nil {
		return err
	}
	if err := act(); err != nil {
		return err
	}
	return p.WaitFor(ctx, "!"+oldDocument+` && document.readyState === "complete"`)
}

// Screenshot returns a PNG of the whole page.
func (p *Page) Screenshot(ctx context.Context) ([]byte, error) {
	var shot struct {
		Data string `json:"data"`
	}
	if err := p.b.send(ctx, p.session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}, &shot); err != nil {
		return nil, err
	}
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		return nil, fmt.Errorf("cdp: screenshot: %w", err)
	}
	if len(png) == 0 {
		return nil, errors.New("cdp: screenshot: empty")
	}
	return png, nil
}

// BringToFront makes the page the visible tab (a hidden tab's
// document.hidden is true).
func (p *Page) BringToFront(ctx context.Context) error {
	return p.b.send(ctx, p.session, "Page.bringToFront", struct{}{}, nil)
}
