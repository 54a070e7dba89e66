"""Lambda plumbing: runtime set-up, tracing, event shapes, custom resources, the queue handler."""
