"""The Replay page (replay.py): recorded trace pairs played back without a model."""
