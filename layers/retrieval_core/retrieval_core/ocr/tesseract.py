"""tesseract's command line, where one is installed: each image a scanned page draws, read in turn.

The executable is looked up on PATH when the first scanned page is read (the service runs without it
while OCR_ENGINE is not `tesseract`); a missing one is a ConfigurationError. Each image is written to a
temporary file (JPEG, JPEG 2000, or PNM made from the PDF's samples: parsers/scanned_pages.py) and read
with `tesseract FILE stdout`, its default language and page segmentation, within the parse deadline.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from retrieval_core.exceptions import ConfigurationError
from retrieval_core.parsers.exceptions import OcrFailedError
from retrieval_core.parsers.scanned_pages import ScannedPage

EXECUTABLE = "tesseract"
# The last characters of tesseract's standard error an OcrFailedError carries.
MAX_ERROR_CHARS = 300


class TesseractOcr:
    """Reads scanned pages by running tesseract on the images they draw."""

    name = "tesseract"

    def __init__(self, max_pages: int, executable: str = EXECUTABLE) -> None:
        self.max_pages = max_pages
        self.executable = executable

    def read_page(self, page: ScannedPage, timeout_s: float) -> str:
        """The text of every image of the page, in resource order, separated by blank lines."""
        program = shutil.which(self.executable)
        if program is None:
            raise ConfigurationError(
                f"OCR_ENGINE is tesseract, but no `{self.executable}` is on PATH: install tesseract "
                "(Debian: tesseract-ocr), or set OCR_ENGINE to textract or none"
            )
        texts: list[str] = []
        with tempfile.TemporaryDirectory(prefix="retrieval-ocr-") as folder:
            for index, image in enumerate(page.images(self.name)):
                path = Path(folder) / f"image-{index}{image.suffix}"
                path.write_bytes(image.data)
                try:
                    done = subprocess.run(  # noqa: S603  (our own argument list, no shell)
                        [program, str(path), "stdout"], capture_output=True, timeout=timeout_s, check=False
                    )
                except subprocess.TimeoutExpired:
                    raise TimeoutError(f"tesseract ran past {timeout_s:.1f} s") from None
                if done.returncode != 0:
                    error = done.stderr.decode("utf-8", "replace").strip()[-MAX_ERROR_CHARS:]
                    raise OcrFailedError(
                        self.name, page.number, f"tesseract exited {done.returncode}: {error}"
                    )
                texts.append(done.stdout.decode("utf-8", "replace").strip())
        return "\n\n".join(text for text in texts if text)
