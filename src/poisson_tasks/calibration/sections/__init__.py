"""card.md's sections, one module each (docs/architecture.md, "How to add a card section").

Each module builds its section's lines from the Artifact alone; calibration/render.py lists them
in card order. `text` holds the printed precision every section shares. This file imports nothing.
"""
