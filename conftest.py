"""Repository-wide pytest settings. The plugin itself loads through its entry point
(``pytest11: xla_dynamo``); it is deliberately not listed in ``pytest_plugins`` here."""

collect_ignore = ["benchmarks", "docs", "build"]
