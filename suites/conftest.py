"""Suite-wide settings for the bundled conformance suites (the plugin itself loads by entry point)."""
