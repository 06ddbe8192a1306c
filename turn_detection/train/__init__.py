"""Training of the end-of-turn text model (turn_detection/eot_text.py): `python -m turn_detection.train`.

Not imported at run time; needs the `train` dependency group (the chat data), not the worker's.
"""
