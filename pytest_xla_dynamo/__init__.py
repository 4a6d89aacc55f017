"""pytest-xla-dynamo: a pytest plugin and conformance suite for dynamo (torch.compile) + torch_xla.

Importing this package imports no torch.
"""

from __future__ import annotations

__version__ = "0.2.0"
