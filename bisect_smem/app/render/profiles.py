"""The published per-architecture table (``profiles``): as text, one row per profile in a table that fits
the width it is given, and as the JSON document of ``profiles --json`` (``bisect_smem/profiles/v1``)."""

from __future__ import annotations

from bisect_smem.app.render.width import table, wrapped
from bisect_smem.core.jsonable import dumps, to_jsonable
from bisect_smem.core.profiles import ArchProfile
from bisect_smem.core.text import dash

PROFILES_SCHEMA = "bisect_smem/profiles/v1"
HEADERS = ("profile", "cc", "aliases", "parts", "smem per SM B", "opt-in per block B", "reserved B", "carveouts KiB")
UNCONFIRMED = "*"  # after a profile's name: its row is not from NVIDIA's guide
FOOTNOTE = f"{UNCONFIRMED} unconfirmed: from CUTLASS / CuTe constants or users' reports, not NVIDIA's guide"


def render(rows: tuple[ArchProfile, ...], width: int) -> str:
    """The published table, one row per profile, in at most ``width`` columns (long cells wrap), and a
    footnote where a row is unconfirmed."""
    cells = [(p.key + ("" if p.confirmed else UNCONFIRMED), p.cc_string, ", ".join(p.aliases), p.example_parts,
              str(p.smem_per_sm_bytes), str(p.max_smem_per_block_optin_bytes), dash(p.reserved_smem_per_block_bytes),
              ", ".join(map(str, p.carveout_kib)) if p.carveout_kib else "-")
             for p in rows]
    footnote = [wrapped(FOOTNOTE, width)] if not all(p.confirmed for p in rows) else []
    return "\n".join([table(cells, HEADERS, width), *footnote]) + "\n"


def render_json(rows: tuple[ArchProfile, ...]) -> str:
    """The JSON document: every profile with every field."""
    return dumps({"schema": PROFILES_SCHEMA, "profiles": [to_jsonable(p) for p in rows]})
