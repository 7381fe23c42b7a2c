// Entry of the browser bundle (scripts/build-browser.mjs): the Node globals first, then the worker.
import './shims/globals.js'
import './worker.js'
