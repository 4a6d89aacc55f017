"""Comparing a sample's results with eager's: element by element where the op defines them, else what it defines.

Most results are compared as parity compares a tensor (:func:`~pytest_xla_dynamo.parity.compare.compare_tensor`:
allclose at the default tolerance, else ``same()``'s rule against the fp64 reference; integers and bools
exact), and a failure names the first bad element with the backend's, eager's and fp64's values. Three kinds
of result are defined only in part, and are compared in that part, with a note saying so (never a silent pass):

* a random op's (the runner found that eager's answer changes with the seed): shapes, dtypes, which elements
  are finite, and for 64 elements or more the mean within six standard errors of eager's;
* the indices of ops that order or select (:data:`INDEX_OPS`) where the input has equal keys: shapes and dtypes
  (which of two equal keys comes first is not defined);
* the vectors of decompositions defined up to a sign per vector (:data:`SIGN_OPS`): absolute values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

#: ops whose integer outputs are indices chosen among equal keys in an undefined order
INDEX_OPS = ("sort", "argsort", "topk", "kthvalue", "mode", "median", "nanmedian", "max", "min", "argmax", "argmin",
             "msort", "cummax", "cummin", "unique", "unique_consecutive", "nn.functional.max_pool1d",
             "nn.functional.max_pool2d", "nn.functional.max_pool3d", "nn.functional.adaptive_max_pool1d",
             "nn.functional.adaptive_max_pool2d", "nn.functional.adaptive_max_pool3d", "aminmax")
#: decompositions whose vectors are defined up to a sign (or a phase) each
SIGN_OPS = ("linalg.eig", "linalg.eigh", "linalg.svd", "svd", "linalg.qr", "qr", "linalg.eigvals", "svd_lowrank",
            "pca_lowrank", "lobpcg", "linalg.householder_product", "geqrf", "linalg.lstsq", "linalg.pinv")
#: ops whose values are undefined (uninitialized memory): only their shapes and dtypes are defined
UNDEFINED_VALUE_OPS = ("empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided", "empty_permuted")
#: standard errors a random op's mean may stray from eager's
STD_ERRORS = 6.0


def base_name(op_id: str) -> str:
    """The entry's name without its variant: ``max.reduction_with_dim`` -> ``max``."""
    for name in sorted(INDEX_OPS + SIGN_OPS, key=len, reverse=True):
        if op_id == name or op_id.startswith(name + "."):
            return name
    return op_id


def same_values(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> bool:
    """Whether two result lists are equal element by element (NaN equal to NaN)."""
    import torch

    a, b = [comparable(t) for t in a], [comparable(t) for t in b]
    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype
                                    and bool(torch.equal(x, y) or (x.is_floating_point()
                                                                   and torch.allclose(x, y, equal_nan=True,
                                                                                      rtol=0, atol=0)))
                                    for x, y in zip(a, b, strict=False))


def compare_all(op_id: str, sample: Any, what: str, eager: Sequence[torch.Tensor], got: Sequence[torch.Tensor],
                fp64: Sequence[torch.Tensor] | None, random: bool) -> tuple[str, str]:
    """``(problem, note)``: the first disagreement of the backend's results ``got`` with ``eager`` ("": none),
    and what was compared in part ("" where everything was compared element by element)."""
    if len(eager) != len(got):
        return f"{len(got)} {what} tensors, eager has {len(eager)}", ""
    name = base_name(op_id)
    notes: list[str] = []
    for i, (ref, res) in enumerate(zip(eager, got, strict=True)):
        label = f"{what}[{i}]"
        ref, res = comparable(ref), comparable(res)
        ref64 = comparable(fp64[i]) if fp64 is not None and i < len(fp64) else None
        if op_id in UNDEFINED_VALUE_OPS:
            problem = _shape_problem(label, ref, res)
            notes.append("uninitialized values: shapes and dtypes compared")
        elif random:
            problem = compare_random(label, ref, res)
        elif name in INDEX_OPS and not (ref.is_floating_point() or ref.is_complex()) and has_ties(sample):
            problem = _shape_problem(label, ref, res)
            notes.append("indices of equal keys compared by shape only")
        elif name in SIGN_OPS:
            problem = compare_exact(label, ref.abs(), res.abs(), None if ref64 is None else ref64.abs())
            notes.append("decomposition compared up to the sign of each vector (absolute values)")
        else:
            problem = compare_exact(label, ref, res, ref64)
        if problem:
            return problem, "; ".join(dict.fromkeys(notes))
    return "", "; ".join(dict.fromkeys(notes))


def comparable(t: torch.Tensor) -> torch.Tensor:
    """A result as the comparisons take it: sparse layouts as dense, complex half as complex64."""
    import torch

    if t.layout != torch.strided:
        t = t.to_dense()
    return t.to(torch.complex64) if t.dtype == torch.complex32 else t


def has_ties(sample: Any) -> bool:
    """Whether the sample's input has two equal values (its order of equal keys is then not defined)."""
    import torch

    t = sample.input
    if not isinstance(t, torch.Tensor) or t.numel() < 2:
        return False
    return bool(torch.unique(t.detach().reshape(-1)).numel() < t.numel())


def _shape_problem(label: str, ref: torch.Tensor, res: torch.Tensor) -> str:
    if ref.shape != res.shape or ref.dtype != res.dtype:
        return f"{label}: shape {tuple(res.shape)} {res.dtype}, eager has {tuple(ref.shape)} {ref.dtype}"
    return ""


def compare_exact(label: str, ref: torch.Tensor, res: torch.Tensor, ref64: torch.Tensor | None) -> str:
    """Parity's comparison of one tensor, the first bad element added to its message."""
    from pytest_xla_dynamo.parity.compare import Tolerance, compare_tensor

    problem = compare_tensor(label, ref, res, ref64, Tolerance())
    if problem is None:
        return ""
    return problem + first_bad(ref, res, ref64, Tolerance().tol)


def first_bad(ref: torch.Tensor, res: torch.Tensor, ref64: torch.Tensor | None, tol: float) -> str:
    """``; first at [i, j]: backend v, eager w (fp64 x)`` for the first element outside the tolerance."""
    import torch

    if ref.shape != res.shape or ref.dtype != res.dtype or ref.numel() == 0:
        return ""
    if ref.is_floating_point() or ref.is_complex():
        bad = ~torch.isclose(res, ref, rtol=tol, atol=tol, equal_nan=True)
    else:
        bad = res != ref
    where = bad.nonzero()
    if where.numel() == 0:
        return ""
    index = tuple(int(i) for i in where[0])
    fp64 = f" (fp64 {ref64[index].item():.6g})" if ref64 is not None and ref64.shape == ref.shape else ""
    return f"; first at {list(index)}: backend {_value(res[index])}, eager {_value(ref[index])}{fp64}"


def _value(t: torch.Tensor) -> str:
    v = t.item()
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def compare_random(label: str, ref: torch.Tensor, res: torch.Tensor) -> str:
    """A random op's result: shape, dtype, the finite elements, and the mean within :data:`STD_ERRORS`."""
    import torch

    problem = _shape_problem(label, ref, res)
    if problem or not ref.is_floating_point():
        return problem
    if not torch.equal(torch.isfinite(ref), torch.isfinite(res)):
        return f"{label}: finite at other elements than eager's (a random op; its finiteness is defined)"
    finite = torch.isfinite(ref)
    n = int(finite.sum())
    if n < 64:
        return ""
    a, b = ref[finite].double(), res[finite].double()
    stderr = float(a.std()) / n ** 0.5 + 1e-6
    if abs(float(a.mean()) - float(b.mean())) > STD_ERRORS * stderr:
        return (f"{label}: mean {float(b.mean()):.4g}, eager's {float(a.mean()):.4g}: more than {STD_ERRORS:g} "
                f"standard errors ({stderr:.2g}) apart (a random op: its distribution is compared)")
    return ""
