"""The drift audit's stream side: the label join and windows, the label budget, label files, canaries, the report.

- ``handlers``: the label join and the series windows, as Faust tables and handlers.
- ``budget``: the audit label budget (measure the verdict rate, scale the sampling).
- ``label_files``: reading human-label files (JSONL or CSV), never dropping a line.
- ``label_import``: ``pairjudge labels import``.
- ``canary``: human-labelled pairs sent through the live pipeline on a schedule.
- ``report``: ``pairjudge report``, one self-contained HTML file per series.
"""
