"""The champion-challenger scoreboard's stream side: the table of scoreboards, what it shows, its charts.

- ``handlers``: one Faust table of scoreboards by experiment, and the gate updates.
- ``view``: a scoreboard as formatted text, the human basis beside the judge basis.
- ``charts``: inline SVG charts for the review service's page and the report.
- ``plain``: numbers and names as users read them, the rules every page and the report keep, and the glossary.
- ``gate_reader``: ``pairjudge gate``, the latest gate decision read back from Kafka.
"""
