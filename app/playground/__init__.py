"""The Playground page (playground.py) and the code only it uses: its controls, its two runs, the depth policies' options."""
