"""The keys of a "depth-family" study (reports.experiments.depth_family.experiment): the
families' member files and the inputs they are judged on, read and checked when the study
is read; one case per family, with the files' digests.

`models` is an array of saved networks (one family, named "family") or a table of such
arrays by family name. Every member is read and checked with the inputs as a network-limit
study reads its model (reports.experiments.network.inputs.Network: the files never
unpickled, shapes, widths, NaN, token ids, labels, the mask), then the family as a whole
(convergence.depth_family.check_family: two or more members of one width, depths growing
by one constant factor, each with a time-step limit): a one-line error naming the file
and the key, and nothing runs.
"""

from __future__ import annotations

from typing import Any

from convergence.depth_family import check_family
from reports.experiments.network.inputs import FIELDS as NETWORK_FIELDS
from reports.experiments.network.inputs import STARTS, Network, digest
from reports.schema import Field, number, reject, text
from solvers.errors import InvalidInputError

FAMILY = "family"
"""The name of the one family of a `models` array."""


def _families(value: Any, where: str) -> dict[str, list[str]]:
    """{family name: its member files} from an array (one family) or a table of arrays."""
    if isinstance(value, list):
        value = {FAMILY: value}
    if not isinstance(value, dict) or not value:
        raise reject(
            where, f"must be an array of saved networks or a table of them by family, got {value!r}"
        )
    families = {}
    for name, members in value.items():
        at = f"{where}.{name}" if name != FAMILY or len(value) > 1 else where
        if "/" in name:  # a family names its case, "<experiment>/<family>"
            raise reject(at, f"a family's name must not contain '/', got {name!r}")
        if not isinstance(members, list):
            raise reject(at, f"must be an array of saved networks, got {members!r}")
        if len(members) < 2:
            raise reject(
                at, f"a depth family needs at least two members, got {len(members)}: {members}"
            )
        families[name] = [text(m, f"{at}[{i}]") for i, m in enumerate(members)]
    return families


FIELDS = {
    "models": Field(
        _families,
        help="an array of saved networks (save_pretrained directories or .safetensors files) "
        "of one family at growing depths, or a table of such arrays by family name",
        relative=True,
    ),
    **{key: NETWORK_FIELDS[key] for key in (*STARTS, "mask", "labels")},
    "horizon": Field(
        number(positive=True),
        1.0,
        "T: each member's residual branches are scaled by h = T / L (docs/depth.md section 1)",
    ),
}


def members(params: dict[str, Any], family: str, where: str = "") -> list[Network]:
    """The family's members, each read with the inputs (Network), then the family checked."""
    base = f"{where}.models" if where else "models"
    at = base if len(params["models"]) == 1 and family == FAMILY else f"{base}.{family}"
    keys = [(path, f"{at}[{i}]") for i, path in enumerate(params["models"][family])]
    try:  # the family first: a member of another width would fail on the inputs' width
        check_family([Network.read_model(*key) for key in keys])
    except InvalidInputError as exc:
        raise reject(at, str(exc)) from None
    return [Network(params, where, key) for key in keys]


def check_family_study(params: dict[str, Any], where: str) -> dict[str, Any]:
    """Read every family's files and check them (module docstring)."""
    for family in params["models"]:
        members(params, family, where)
    return params


def family_cases(params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """One case per family, its parameters carrying the digests of its members and inputs."""
    inputs = [key for key in (*STARTS, "mask", "labels") if params[key] is not None]
    cases = []
    for family, paths in params["models"].items():
        sha = {key: digest(params[key]) for key in inputs}
        sha |= {f"models[{i}]": digest(p) for i, p in enumerate(paths)}
        cases.append((family, params | {"family": family, "sha256": sha}))
    return cases
