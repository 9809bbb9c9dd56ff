"""Plans and simulations for people and files: text tables, --explain, CSV/JSON, HTML."""
