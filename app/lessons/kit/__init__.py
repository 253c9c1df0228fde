"""What the lessons share: the record type, runs, rules, charts, the page's parts and the GPU view."""
