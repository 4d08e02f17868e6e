"""One module per kind of record, named as the kind, and the only place that
kind's summary.json keys are spelled.

A module holds `headlines(record)`, the figures the results history keeps
of the kind, and for a kind whose summary is typed, `RECORD`: its frozen
record type, built by the package that measures and read back by the
report and the notebooks. `to_record()` gives the summary as summary.json
holds it, `RECORD.from_record(summary)` the typed record again. The
kinds and their order are `echomq_bench.records.record.KINDS`; the results
history (records.headlines) and the report (report.kinds) find each
kind's module by its name, so no second list of kinds exists.
"""
