"""A benchmark service process for the suite's tables.

Starts a service program on 127.0.0.1 (port 0; it prints "PORT <n>" and
serves until its standard input closes), or stands for one already running
at an address given with --connect*.
"""
from __future__ import annotations

import re
import subprocess
from typing import Optional


class ServiceProcess:
    def __init__(self, path: str, connect: Optional[str] = None, env: Optional[dict] = None):
        self.path = path
        self.connect = connect
        self.env = env
        self.proc: Optional[subprocess.Popen] = None
        self.address = connect or ""

    def start(self) -> "ServiceProcess":
        if self.connect:  # already running, possibly on another host
            self.address = self.connect
            return self
        self.proc = subprocess.Popen([self.path, "127.0.0.1:0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=self.env)
        line = self.proc.stdout.readline()
        m = re.match(r"PORT (\d+)", line or "")
        if not m:
            self.stop()
            raise RuntimeError(f"{self.path} did not report its port (got {line!r})")
        self.address = f"127.0.0.1:{m.group(1)}"
        return self

    def stop(self) -> None:
        if self.proc:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except Exception:  # noqa: BLE001 - a hung service is killed
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def alive(self) -> bool:
        return self.connect is not None or (self.proc is not None and self.proc.poll() is None)
