"""Make docs/report.png, the README's picture of `heapmem report`.

    python examples/report_shot.py

In a temporary folder: the demo (examples/lisbon.py) builds agent.db, then
`heapmem report agent.db --now 2025-03-14` writes report.html (the demo's
clock, so the page is the same on every run), and headless chromium (Debian's
`chromium` package) screenshots it at three quarters of its size.  The PNG
carries the text of the page it shows (an iTXt chunk, "heapmem-page"), so
that tests/test_docs.py can check the picture still shows the page today's
heapmem writes: when the C core, the report or the demo change what the page
says, the test fails until this is run again.
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from html import unescape
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "report.png"
WIDTH, HEIGHT, SCALE = 1000, 2700, 0.75  # the page's layout size, and the picture's scale
KEY = b"heapmem-page"


def page(tmp: str) -> str:
    """The demo's report page, made in tmp (report.html); returns its path."""
    subprocess.run([sys.executable, str(ROOT / "examples" / "lisbon.py")], cwd=tmp,
                   check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "heapmem", "report", "agent.db", "--now",
                    "2025-03-14"], cwd=tmp, check=True, capture_output=True)
    return os.path.join(tmp, "report.html")


def page_text(html: str) -> str:
    """What a page says: its text without tags, styles or the store's file
    size, one line per run of text."""
    html = re.sub(r"<style.*?</style>", "", html, flags=re.S)
    text = unescape(re.sub(r"<[^>]+>", "\n", html))
    text = re.sub(r"\(\d[\d,]* KiB", "(KiB", text)  # the file's size moves with SQLite's pages
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def shown_text(png: bytes) -> str | None:
    """The page text a PNG made here carries (None: it carries none)."""
    i = 8
    while i < len(png):
        n, kind = struct.unpack(">I4s", png[i:i + 8])
        data = png[i + 8:i + 8 + n]
        if kind == b"iTXt" and data.startswith(KEY + b"\0"):
            rest = data[len(KEY) + 1:]
            compressed, body = rest[0], rest[2:].split(b"\0", 2)[2]
            return (zlib.decompress(body) if compressed else body).decode("utf-8")
        i += 12 + n
    return None


def with_text(png: bytes, text: str) -> bytes:
    """png with an iTXt chunk holding text (compressed), before its IEND."""
    data = KEY + b"\0\x01\x00\0\0" + zlib.compress(text.encode("utf-8"), 9)
    chunk = struct.pack(">I", len(data)) + b"iTXt" + data + struct.pack(
        ">I", zlib.crc32(b"iTXt" + data) & 0xFFFFFFFF)
    end = png.rindex(b"IEND") - 4
    return png[:end] + chunk + png[end:]


def main() -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        sys.exit("report_shot.py needs chromium: apt-get install chromium")
    tmp = tempfile.mkdtemp()
    try:
        html = page(tmp)
        shot = os.path.join(tmp, "report.png")
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        f"--user-data-dir={os.path.join(tmp, 'profile')}", "--hide-scrollbars",
                        f"--window-size={WIDTH},{HEIGHT}", f"--force-device-scale-factor={SCALE}",
                        f"--screenshot={shot}", Path(html).as_uri()], check=True,
                       capture_output=True, timeout=180)
        OUT.write_bytes(with_text(Path(shot).read_bytes(), page_text(Path(html).read_text())))
    finally:
        shutil.rmtree(tmp)
    print(f"{OUT.relative_to(ROOT)} written ({OUT.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
