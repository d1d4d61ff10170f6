package main

// Upstream logs warnings that matter through klog (ignored config fields, failed labelers) and, in
// go-nvlib's PCI reader, through the standard log package; both are captured per answered item and
// returned in its JSON.

import (
	"flag"
	"io"
	"log"
	"os"
	"regexp"
	"strings"

	"k8s.io/klog/v2"
)

type klogCapture struct{ buf *strings.Builder }

var klogHeader = regexp.MustCompile(`^[IWEF]\d{4} [0-9:.]+\s+\d+ [^\]]+\] `)

// Our temporary files appear in some messages; they are replaced so answers stay deterministic
// (and cacheable by request content).
var tmpPath = regexp.MustCompile(regexp.QuoteMeta(os.TempDir()) + `/nvidia-oracle-[0-9]+`)

func (k *klogCapture) warnings() []string {
	klog.Flush()
	out := []string{}
	for _, line := range strings.Split(k.buf.String(), "\n") {
		line = tmpPath.ReplaceAllString(line, "$$TMPDIR")
		if line = strings.TrimSpace(klogHeader.ReplaceAllString(line, "")); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// reset forgets what earlier items logged.
func (k *klogCapture) reset() {
	klog.Flush()
	k.buf.Reset()
}

// setupKlog routes klog's W/E/F lines into a buffer (and everything to stderr with verbose).
func setupKlog(verbose bool) *klogCapture {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	if verbose {
		_ = fs.Set("alsologtostderr", "true")
	}
	buf := &strings.Builder{}
	klog.SetOutputBySeverity("INFO", io.Discard)
	klog.SetOutputBySeverity("WARNING", buf) // receives W, E and F lines
	klog.SetOutputBySeverity("ERROR", io.Discard)
	klog.SetOutputBySeverity("FATAL", io.Discard)
	log.SetFlags(0)
	if verbose {
		log.SetOutput(io.MultiWriter(buf, os.Stderr))
	} else {
		log.SetOutput(buf)
	}
	return &klogCapture{buf}
}
