"""The core layer: backends, devices, metrics, op patches, cases and the case engine, the stages of a step.

It knows torch and torch_xla (imported lazily) and the model zoo, and nothing of pytest's plugin machinery:
the pytest-facing parts (markers, the session, the concern plugins and fixtures) stand above it and pass it
what it needs. ``tests/test_layers.py`` holds it to that.
"""
