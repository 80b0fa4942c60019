"""The knob probe as a recipe, one module per step (docs/probe.md):

design     the registration, its validation, the plans it runs and the folders they fill
run        run_probe and rerun_void: the plans run model by model into a probe folder
rules      per-arm counts, the paired differences and the verdict they are read into
table      analyse: a probe folder's records read into its outcome, and nothing else
render     probe.json and probe.md
figures    the data types of a cell, a row and the outcome (knobtable.knob_status builds one)
published  the figures the design's authors measured once, on another build (knobtable.knob_status()
           joins them to the knob definitions)

This file imports nothing, so importing one step (knobtable imports only probe.published
and probe.figures) loads no other; docs/architecture.md places each module in its layer.
"""
