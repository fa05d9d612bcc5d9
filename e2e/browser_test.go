package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// browser is one headless chromium a test reads its pages through, over
// the DevTools pipe (--remote-debugging-pipe): the browser reads commands
// from its fd 3 and writes answers and events to its fd 4, each a JSON
// message ended by a NUL. One browser serves every page of a test, each
// page in a tab of its own, instead of a browser started per page.
type browser struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	done chan struct{} // closed when the browser's output ends

	mu      sync.Mutex
	next    int
	answers map[int]chan cdpMessage
	events  map[string]chan cdpMessage // by the tab's session
	err     error                      // why the output ended
}

// cdpMessage is an answer (ID set) or an event (Method set) from the
// browser.
type cdpMessage struct {
	ID        int             `json:"id"`
	Method    string          `json:"method"`
	SessionID string          `json:"sessionId"`
	Params    json.RawMessage `json:"params"`
	Result    json.RawMessage `json:"result"`
	Error     *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// startBrowser starts chromium at bin with its profile in dir; it is
// stopped when the test ends.
func startBrowser(t *testing.T, bin, dir string) (*browser, error) {
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		cmdR.Close()
		cmdW.Close()
		return nil, err
	}
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--remote-debugging-pipe", "--user-data-dir="+filepath.Join(dir, "profile"), "about:blank")
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_CACHE_HOME="+dir)
	cmd.ExtraFiles = []*os.File{cmdR, outW} // fds 3 and 4
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	err = cmd.Start()
	cmdR.Close()
	outW.Close()
	if err != nil {
		cmdW.Close()
		outR.Close()
		return nil, fmt.Errorf("chromium: %v", err)
	}
	b := &browser{cmd: cmd, in: cmdW, done: make(chan struct{}),
		answers: map[int]chan cdpMessage{}, events: map[string]chan cdpMessage{}}
	go b.read(outR, stderr)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		b.call(ctx, "", "Browser.close", nil, nil)
		select {
		case <-b.done:
		case <-ctx.Done():
		}
		// The browser's own processes go with it.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		cmdW.Close()
		outR.Close()
	})
	return b, nil
}

// read hands each message from the browser to whoever waits for it,
// until the browser's output ends.
func (b *browser) read(out io.Reader, stderr *syncBuffer) {
	r := bufio.NewReader(out)
	var err error
	for {
		var line []byte
		line, err = r.ReadBytes(0)
		if err != nil {
			break
		}
		var m cdpMessage
		if json.Unmarshal(line[:len(line)-1], &m) != nil {
			continue
		}
		b.mu.Lock()
		if c, ok := b.answers[m.ID]; ok && m.ID != 0 {
			delete(b.answers, m.ID)
			c <- m
		} else if c, ok := b.events[m.SessionID]; ok && m.Method != "" {
			select {
			case c <- m:
			default: // no one needs this many events of one tab
			}
		}
		b.mu.Unlock()
	}
	b.mu.Lock()
	b.err = fmt.Errorf("the browser's output ended (%v)\n%s", err, stderr.String())
	b.mu.Unlock()
	close(b.done)
}

// call sends method with params, in the tab of session ("" for the
// browser), and decodes its result into result (when not nil).
func (b *browser) call(ctx context.Context, session, method string, params, result any) error {
	b.mu.Lock()
	if b.err != nil {
		b.mu.Unlock()
		return b.err
	}
	b.next++
	id := b.next
	c := make(chan cdpMessage, 1)
	b.answers[id] = c
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	buf, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if _, err := b.in.Write(append(buf, 0)); err != nil {
		return fmt.Errorf("%s: %v", method, err)
	}
	select {
	case m := <-c:
		if m.Error != nil {
			return fmt.Errorf("%s: %s", method, m.Error.Message)
		}
		if result != nil {
			return json.Unmarshal(m.Result, result)
		}
		return nil
	case <-b.done:
		b.mu.Lock()
		defer b.mu.Unlock()
		return fmt.Errorf("%s: %v", method, b.err)
	case <-ctx.Done():
		return fmt.Errorf("%s: %v", method, ctx.Err())
	}
}

// dom opens pageURL in a new tab, waits for its load, and returns
// its DOM as chromium's --dump-dom prints it (the doctype, then the
// document element's HTML).
func (b *browser) dom(pageURL string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var target struct{ TargetID string }
	if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		return "", err
	}
	defer b.call(ctx, "", "Target.closeTarget", map[string]any{"targetId": target.TargetID}, nil)
	var attached struct{ SessionID string }
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
		return "", err
	}
	events := make(chan cdpMessage, 64)
	b.mu.Lock()
	b.events[attached.SessionID] = events
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.events, attached.SessionID)
		b.mu.Unlock()
	}()
	if err := b.call(ctx, attached.SessionID, "Page.enable", nil, nil); err != nil {
		return "", err
	}
	if err := b.call(ctx, attached.SessionID, "Page.setLifecycleEventsEnabled", map[string]any{"enabled": true}, nil); err != nil {
		return "", err
	}
	var nav struct{ LoaderID, ErrorText string }
	if err := b.call(ctx, attached.SessionID, "Page.navigate", map[string]any{"url": pageURL}, &nav); err != nil {
		return "", err
	}
	if nav.ErrorText != "" {
		return "", fmt.Errorf("chromium %s: %s", pageURL, nav.ErrorText)
	}
	for loaded := false; !loaded; {
		select {
		case m := <-events:
			// The load of this navigation, not of the blank page before it.
			var ev struct{ Name, LoaderID string }
			json.Unmarshal(m.Params, &ev)
			loaded = m.Method == "Page.lifecycleEvent" && ev.Name == "load" && ev.LoaderID == nav.LoaderID
		case <-b.done:
			return "", errors.New("chromium " + pageURL + ": the browser ended")
		case <-ctx.Done():
			return "", fmt.Errorf("chromium %s: no load event: %v", pageURL, ctx.Err())
		}
	}
	var eval struct {
		Result struct {
			Value string `json:"value"`
		} `json:"result"`
		ExceptionDetails json.RawMessage `json:"exceptionDetails"`
	}
	const dump = `(document.doctype ? new XMLSerializer().serializeToString(document.doctype) + "\n" : "") + document.documentElement.outerHTML`
	if err := b.call(ctx, attached.SessionID, "Runtime.evaluate", map[string]any{"expression": dump, "returnByValue": true}, &eval); err != nil {
		return "", err
	}
	if eval.ExceptionDetails != nil {
		return "", fmt.Errorf("chromium %s: reading the DOM: %s", pageURL, eval.ExceptionDetails)
	}
	return eval.Result.Value + "\n", nil
}
