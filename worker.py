"""Parley worker: `python worker.py dev|start|console|connect|download-files` (LiveKit Agents CLI)."""

from worker.server import main

if __name__ == "__main__":
    main()
