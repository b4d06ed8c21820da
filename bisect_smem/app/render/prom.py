"""A report as a Prometheus textfile-collector file (node_exporter's ``--collector.textfile.directory``).

Every family is a gauge named ``bisect_smem_*`` in base units, with exactly one HELP and one TYPE line
and its samples together; no sample carries a timestamp (the collector adds none either). Device
series carry dcgm-exporter's label names (``gpu``, ``UUID``, ``pci_bus_id``) and ``driver_version``.
They join with DCGM's series ``on(UUID)``, or ``on(pci_bus_id)``, which is written in NVML's format
(``00000000:3B:00.0``, as DCGM writes it) also where NVML could not be read. ``gpu`` is the CUDA ordinal
the tool measured, not DCGM's NVML index: the two differ inside a pod or a job that sees some of the
node's GPUs, so it is no join key. (dcgm-exporter's camel-case ``modelName`` is left out: promtool's lint
refuses it, and the UUID names the device anyway.)
"""

from __future__ import annotations

from collections.abc import Iterator

from bisect_smem import __version__
from bisect_smem.analysis.summary import summarize
from bisect_smem.core.frozen import frozen
from bisect_smem.core.model import DeviceReport, Report
from bisect_smem.core.quantities import declared
from bisect_smem.core.status import DeviceSummary, VerdictCounts

PREFIX = "bisect_smem_"
Labels = tuple[tuple[str, str], ...]


@frozen
class Family:
    """One metric family: its name (without the prefix), help text and samples."""

    name: str
    help: str
    samples: tuple[tuple[Labels, float], ...]


def escape_label(value: str) -> str:
    """A label value as the text format writes it: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """A HELP text as the text format writes it: backslash and newline escaped."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def device_labels(dev: DeviceReport) -> Labels:
    """The labels that name a device as dcgm-exporter does, plus its driver version ('' where unknown)."""
    ctx = dev.context
    return (("gpu", str(dev.index)), ("UUID", str(ctx.nvml_uuid or "")),
            ("pci_bus_id", str(ctx.nvml_format_pci_bus_id or "")),
            ("driver_version", str(ctx.nvml_driver_version or "")))


def _summary(dev: DeviceReport) -> DeviceSummary:
    return dev.summary if dev.summary is not None else summarize(dev)


def _device_families(report: Report) -> Iterator[Family]:
    gpus = report.by_gpu()
    devices = [group[0] for group in gpus]
    yield Family("device_ok", "1 when the device passed (no mismatch, measured completely), else 0.",
                 tuple((device_labels(g[0]), float(all(_summary(d).status == "pass" for d in g))) for g in gpus))
    yield Family("verdict_rows", "Verdict rows of the device by verdict (match, mismatch, differs, info, error).",
                 tuple(((*device_labels(g[0]), ("verdict", name)), float(sum(getattr(_summary(d).counts, name) for d in g)))
                       for g in gpus for name in VerdictCounts.__dataclass_fields__))
    # Every declared quantity with a help text, named as in the report.
    for q in declared("measured"):
        if q.help is not None:
            yield Family(q.name, q.help, tuple((device_labels(d), float(q.of(d.measured))) for d in devices
                                               if q.of(d.measured) is not None))
    yield Family("reported_optin_bytes", "Opt-in shared memory per block as a source reports it (attribute 97).",
                 tuple(((*device_labels(d), ("source", source)), float(view.max_shared_memory_per_block_optin_bytes))
                       for d in devices for source, view in sorted(d.reported.sources().items())
                       if isinstance(view.max_shared_memory_per_block_optin_bytes, int)))


def families(report: Report) -> list[Family]:
    """Every family of the report, the run's first, then one sample per device (or device and label)."""
    run = [
        Family("build_info", "The bisect-smem version and report schema that wrote these metrics.",
               (((("version", report.tool_version or __version__), ("schema", report.schema)), 1.0),)),
        Family("last_run_timestamp_seconds", "When the measurement ran, as Unix time.",
               (((), float(report.created_unix_seconds)),)),
        Family("devices", "Devices in the report.", (((), float(len(report.by_gpu()))),)),
    ]
    if report.exit_code is not None:
        run.append(Family("last_run_exit_code", "Exit code of the run: 0 pass, 1 mismatch, 2 bad input, 3 no GPU, "
                                                "4 incomplete.", (((), float(report.exit_code)),)))
    return run + [f for f in _device_families(report) if f.samples]


def _value(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


def render(report: Report) -> str:
    """The textfile-collector text: per family one HELP, one TYPE and its samples; a final newline."""
    lines: list[str] = []
    for family in families(report):
        name = PREFIX + family.name
        lines += [f"# HELP {name} {escape_help(family.help)}", f"# TYPE {name} gauge"]
        for labels, value in family.samples:
            text = ",".join(f'{key}="{escape_label(val)}"' for key, val in labels)
            lines.append(f"{name}{{{text}}} {_value(value)}" if text else f"{name} {_value(value)}")
    return "\n".join(lines) + "\n"
