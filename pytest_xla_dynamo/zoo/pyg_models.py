"""The torch_geometric models of the ``graph`` collection: GCN, GAT, GraphSAGE, GIN.

``torch_geometric.nn.models`` (random init), node classification ``forward(x, edge_index)`` -> logits per
node, on a random graph: standard-normal node features and uniformly random directed edges (int64
``2 x edges``; self loops and duplicates possible, as in real data). Message passing is gather + scatter
(``index_select``, ``scatter_add``/``index_add``); GCN also adds self loops (a boolean mask whose size
depends on the data). Small: 32 nodes, 128 edges, 16 features, hidden 32, 2 layers, 4 classes; full:
Cora's size (2708 nodes, 10556 edges, 1433 features, hidden 64, 7 classes). The "batch" is the number of
graphs' worth of nodes: 1 at both tiers (one graph).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_xla_dynamo.zoo.family import Row
from pytest_xla_dynamo.zoo.family import specs as _specs
from pytest_xla_dynamo.zoo.spec import ModelSpec

if TYPE_CHECKING:
    import torch

SOURCE = "torch_geometric"
REQUIRES = ("torch", "torch_geometric")


def gnn(tier: str, *, name: str, **kw: Any) -> torch.nn.Module:
    import torch_geometric.nn.models as models

    model: torch.nn.Module = getattr(models, name)(**kw)
    return model


def random_graph(tier: str, batch: int, *, nodes: int, edges: int, features: int) -> tuple[torch.Tensor, ...]:
    """``batch`` disjoint random graphs as one: node features (``batch*nodes x features``) and edges
    (``2 x batch*edges``, int64)."""
    import torch

    x = torch.randn(batch * nodes, features)
    edge_index = torch.cat([torch.randint(0, nodes, (2, edges)) + g * nodes for g in range(batch)], dim=1)
    return x, edge_index


_SMALL = {"in_channels": 16, "hidden_channels": 32, "num_layers": 2, "out_channels": 4}
_FULL = {"in_channels": 1433, "hidden_channels": 64, "num_layers": 2, "out_channels": 7}
_GRAPH = ({"nodes": 32, "edges": 128, "features": 16}, {"nodes": 2708, "edges": 10556, "features": 1433})


def _row(name: str, extra: dict[str, Any] | None = None) -> Row:
    kw = extra or {}
    return Row("graph", name.lower(), SOURCE, REQUIRES, gnn,
               ({"name": name, **_SMALL, **kw}, {"name": name, **_FULL, **kw}), random_graph, _GRAPH, (1, 1), False,
               f"torch_geometric.nn.models.{name}" + "".join(f", {k}={v!r}" for k, v in kw.items())
               + ", forward(x, edge_index) -> node logits.")


ROWS: tuple[Row, ...] = (
    _row("GCN"),
    _row("GAT", {"heads": 2}),
    _row("GraphSAGE"),
    _row("GIN"),
)


def specs() -> list[ModelSpec]:
    """The specs of :data:`ROWS`, in table order."""
    return _specs(ROWS)
