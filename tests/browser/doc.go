// Package browser tests the dashboard in a real browser: browser_test.go
// starts the shardcounter binary and runs dashboard.mjs, a Playwright
// script, against it in Debian's Chromium. It holds no code of its own.
package browser
