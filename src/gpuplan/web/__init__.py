"""The local web calculator: a JSON API generated from the CLI's commands, and one page."""
