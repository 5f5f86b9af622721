"""The controller's persistent state (fabric, jobs, their routes) in one sqlite row.

Each save replaces the whole document inside one transaction, so a crash leaves either the old
or the new state, never half of each. sqlite is in Python's standard library.
"""
from __future__ import annotations

import json
import sqlite3


class StateStore:
    def __init__(self, path: str):
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT NOT NULL)")

    def save(self, doc: dict) -> None:
        text = json.dumps(doc)
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute("INSERT OR REPLACE INTO state (key, value) VALUES ('state', ?)", (text,))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def load(self) -> dict | None:
        row = self.db.execute("SELECT value FROM state WHERE key = 'state'").fetchone()
        return json.loads(row[0]) if row else None

    def close(self) -> None:
        self.db.close()
