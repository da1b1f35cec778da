"""Make docs/report.png, the README's picture of `heapmem report`.

    python examples/report_shot.py

In a temporary folder: the demo (examples/lisbon.py) builds agent.db, then
`heapmem report agent.db --now 2025-03-14` writes report.html (the demo's
clock, so the page is the same on every run), and headless chromium (Debian's
`chromium` package) screenshots it at three quarters of its size.
"""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "report.png"
WIDTH, HEIGHT, SCALE = 1000, 2700, 0.75  # the page's layout size, and the picture's scale


def main() -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        sys.exit("report_shot.py needs chromium: apt-get install chromium")
    tmp = tempfile.mkdtemp()
    try:
        subprocess.run([sys.executable, str(ROOT / "examples" / "lisbon.py")], cwd=tmp,
                       check=True, capture_output=True)
        subprocess.run([sys.executable, "-m", "heapmem.cli", "report", "agent.db", "--now",
                        "2025-03-14"], cwd=tmp, check=True, capture_output=True)
        page = Path(tmp, "report.html").as_uri()
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        f"--user-data-dir={os.path.join(tmp, 'profile')}", "--hide-scrollbars",
                        f"--window-size={WIDTH},{HEIGHT}", f"--force-device-scale-factor={SCALE}",
                        f"--screenshot={OUT}", page], check=True, capture_output=True, timeout=180)
    finally:
        shutil.rmtree(tmp)
    print(f"{OUT.relative_to(ROOT)} written ({OUT.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
