"""Latency in HDR histograms: recorded in microseconds, reported in ms,
merged across processes as encoded blobs (hdrh's own wire form)."""

from __future__ import annotations

from pathlib import Path

from hdrh.histogram import HdrHistogram

__all__ = ["Latency", "PERCENTILES", "read_hgrm"]

PERCENTILES = (50.0, 90.0, 99.0, 99.9)
LOWEST_US, HIGHEST_US, DIGITS = 1, 3_600_000_000, 3  # 1 µs .. 1 h at 0.1%


class Latency:
    def __init__(self) -> None:
        self.hist = HdrHistogram(LOWEST_US, HIGHEST_US, DIGITS)

    def record_ms(self, ms: float) -> None:
        self.hist.record_value(min(HIGHEST_US, max(LOWEST_US, round(ms * 1000))))

    def record_us(self, us: int, count: int = 1) -> None:
        self.hist.record_value(min(HIGHEST_US, max(LOWEST_US, us)), count)

    @property
    def count(self) -> int:
        return int(self.hist.get_total_count())

    def percentile_ms(self, p: float) -> float:
        return float(self.hist.get_value_at_percentile(p)) / 1000.0

    def max_ms(self) -> float:
        return float(self.hist.get_max_value()) / 1000.0

    def summary_ms(self) -> dict[str, float]:
        out = {f"p{p:g}": self.percentile_ms(p) for p in PERCENTILES}
        out["max"] = self.max_ms()
        out["mean"] = self.hist.get_mean_value() / 1000.0
        return out

    def encode(self) -> str:
        blob: bytes = self.hist.encode()
        return blob.decode("ascii")

    @classmethod
    def decode(cls, blob: str | bytes) -> "Latency":
        out = cls()
        out.hist.decode_and_add(blob)
        return out

    def merge(self, other: "Latency") -> "Latency":
        self.hist.add(other.hist)
        return self

    def write_hgrm(self, path: Path) -> None:
        """The percentile distribution text HdrHistogram's plotters read,
        in milliseconds."""
        with path.open("wb") as fh:
            self.hist.output_percentile_distribution(fh, 1000.0)


def read_hgrm(path: Path) -> list[tuple[float, float, int]]:
    """The rows of an .hgrm file (`Latency.write_hgrm`, HdrHistogram's
    percentile text): (value in the file's unit, percentile as a fraction,
    total count up to that value). Headers, the `#[...]` footer and the
    last line's missing 1/(1-p) column are handled alike."""
    rows = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) < 3 or line.lstrip().startswith("#"):
            continue
        try:
            rows.append((float(parts[0]), float(parts[1]), int(float(parts[2]))))
        except ValueError:  # the column header
            continue
    return rows
