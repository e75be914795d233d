"""Op-table entries by op group; each module defines ``ENTRIES: list[OpInfo]``."""
