"""Regenerates the report screenshots in docs/images (``make screenshots``).

- ``html-report.png``: the demo's legacy story page (``graphcheck demo``), checked epoch
  after_reload_rebind, at a desktop width;
- ``html-report-phone.png``: the same page at a phone's width (390 px);
- ``html-report-gpu.png``: the page of the H200 run's check point
  (tests/data/gpu/watch_legacy.json: the watch's CUDA graph read on the GPU, 2026-12-04);
- ``watch-index.png``: ``index.html`` of a folder two processes of the real watch (CPU twin)
  wrote, as the browser tier makes it (tests/browser/watch_folder.py).

usage: screenshots.py --cli build/bin/graphcheck --browser chromium-headless-shell
                      --python VENV/bin/python --work build/screenshots --out docs/images
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))

import browser_check  # noqa: E402  (tests/browser: the tier's headless Chromium runner)
import watch_folder  # noqa: E402  (the folder the browser tier checks)


def shoot(browser: str, page: Path, out: Path, size: tuple[int, int], fragment: str = "") -> None:
    """Save ``page`` (with the URL ``fragment``) as a PNG of ``size`` pixels."""
    browser_check.chromium(
        browser, page, f"--screenshot={out.resolve()}", query=fragment, size=size
    )
    print(f"wrote {out} ({size[0]}x{size[1]})")


def main() -> int:
    """Make the demo's pages, the GPU check point's page and a watch folder; shoot each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", required=True)
    parser.add_argument("--browser", required=True)
    parser.add_argument("--python", required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    demo = args.work / "demo"
    subprocess.run([args.cli, "demo", "--out", str(demo)], check=True, capture_output=True)
    shoot(args.browser, demo / "legacy.html", args.out / "html-report.png", (1400, 1560))
    shoot(args.browser, demo / "legacy.html", args.out / "html-report-phone.png", (390, 1500))
    gpu = args.work / "watch_legacy.html"
    done = subprocess.run(
        [
            args.cli,
            "check",
            str(ROOT / "tests/data/gpu/watch_legacy.json"),
            "--format",
            "html",
            "--output",
            str(gpu),
        ],
        check=False,
    )
    if done.returncode not in (0, 1):
        return done.returncode
    shoot(args.browser, gpu, args.out / "html-report-gpu.png", (1400, 2000))
    folder = watch_folder.make_folder(args.python, args.work / "watch")
    shoot(args.browser, folder / "index.html", args.out / "watch-index.png", (1400, 440))
    return 0


if __name__ == "__main__":
    sys.exit(main())
