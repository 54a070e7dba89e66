"""Scanned PDF pages: telling them apart, and the face an OCR engine reads them through. Pure: no I/O.

A page is *scanned* when its content draws images (an image XObject, an inline image) and shows no text
(no `Tj`, `TJ`, `'` or `"` operator), its forms included. A page that does neither is blank, and a PDF of
blank pages is an empty document, not a scan. A page that shows text which extracts to nothing (a font
without a Unicode map) is not a scan either: OCR is not asked to read over a text layer.

The engines themselves (Textract, tesseract) live in `retrieval_core.ocr`, outside the pure parsers; the
parser hands each scanned page over as a `ScannedPage`, which gives the page as a one-page PDF or as the
image files it draws.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from retrieval_core.parsers.base import Block, error_summary
from retrieval_core.parsers.budget import ParseMeter
from retrieval_core.parsers.detect import PDF
from retrieval_core.parsers.exceptions import DocumentLimitError, DocumentParseError, OcrRefusedError

_TEXT_SHOWING = frozenset({b"Tj", b"TJ", b"'", b'"'})
# What a chunk cut from an OCR'd page says of its text, beside its pageNumber.
OCR_TEXT_SOURCE = "ocr"


@dataclass(slots=True)
class PageMarks:
    """What a page's content operators (forms included) did: showed text, drew images."""

    shows_text: bool = False
    draws_images: bool = False

    def see(self, operator: bytes, operands: Any, forms: dict[Any, int]) -> None:
        """Note one operator; `forms` names the page's form XObjects (any other `Do` draws an image)."""
        if operator in _TEXT_SHOWING:
            self.shows_text = True
        elif operator == b"INLINE IMAGE" or (operator == b"Do" and operands and operands[0] not in forms):
            self.draws_images = True

    @property
    def scanned(self) -> bool:
        """Images and no text: a page only OCR could read."""
        return self.draws_images and not self.shows_text


@dataclass(frozen=True, slots=True)
class PageImage:
    """One image a scanned page draws, as a file an OCR program opens: its bytes and its file suffix."""

    data: bytes
    suffix: str


@dataclass(frozen=True, slots=True)
class ScannedPage:
    """A page with images and no text layer, as an OCR engine may take it."""

    number: int  # 1-based
    page: Any = field(repr=False)  # the pypdf page

    def as_pdf(self) -> bytes:
        """The page alone, as a one-page PDF (what Textract's synchronous call reads)."""
        from pypdf import PdfWriter

        out = io.BytesIO()
        try:
            writer = PdfWriter()
            writer.add_page(self.page)
            writer.write(out)
        except Exception as error:  # noqa: BLE001  (pypdf meets broken objects with many kinds of exception)
            raise DocumentParseError(PDF, f"page {self.number} is damaged ({error_summary(error)})") from None
        return out.getvalue()

    def images(self, engine: str) -> list[PageImage]:
        """The image XObjects of the page's resources as JPEG, JPEG 2000 or PNM files (what an OCR program
        opens), in resource order; images inside forms and inline images are not given. An OcrRefusedError
        (naming `engine`) lists the kinds found when none of them can be given."""
        resources = self.page.get("/Resources")
        xobjects = resources.get_object().get("/XObject") if resources is not None else None
        images: list[PageImage] = []
        refused: list[str] = []
        for reference in xobjects.get_object().values() if xobjects is not None else []:
            xobject = reference.get_object()
            if xobject.get("/Subtype") != "/Image":
                continue
            image = _image_file(xobject)
            if isinstance(image, str):
                refused.append(image)
            else:
                images.append(image)
        if not images:
            kinds = ", ".join(sorted(set(refused))) or "none among its resources"
            raise OcrRefusedError(engine, self.number, f"no image it can be given (images: {kinds})")
        return images


class OcrEngine(Protocol):
    """Reads the text of scanned pages. `name` goes in each OCR'd block's metadata (`ocrEngine`);
    `max_pages` is the most scanned pages of one PDF it reads (OCR_MAX_PAGES)."""

    name: str
    max_pages: int

    def read_page(self, page: ScannedPage, timeout_s: float) -> str:
        """The page's text, lines separated by newlines ("" when it finds none). Raises TimeoutError after
        `timeout_s`, OcrRefusedError (422) for a page it cannot take, OcrFailedError (502) otherwise."""
        ...


def read_scanned(
    pages: Any, scanned: Sequence[int], blocks: list[Block], engine: OcrEngine, meter: ParseMeter
) -> list[Block]:
    """`blocks` with a block for each `scanned` page the engine found text on, in page order. Each OCR'd
    block's metadata says so: `{"pageNumber": n, "textSource": "ocr", "ocrEngine": name}`."""
    if len(scanned) > engine.max_pages:
        raise DocumentLimitError(
            PDF, "scanned pages to OCR", f"{len(scanned):,}", f"{engine.max_pages:,}", "OCR_MAX_PAGES"
        )
    read: list[Block] = []
    for number in scanned:
        meter.check()
        try:
            text = engine.read_page(ScannedPage(number, pages[number - 1]), meter.remaining_s())
        except TimeoutError:
            meter.check()  # past the deadline: PARSE_TIMEOUT_S names the limit
            raise
        if text.strip():
            metadata = {"pageNumber": number, "textSource": OCR_TEXT_SOURCE, "ocrEngine": engine.name}
            read.append(Block(text.strip(), metadata))
    return sorted([*blocks, *read], key=lambda block: int(block.metadata["pageNumber"]))


def _image_file(xobject: Any) -> PageImage | str:
    """The image as a file an OCR program opens, or the name of its kind when it cannot be one."""
    filters = xobject.get("/Filter")
    names = [str(f) for f in (filters if isinstance(filters, list) else [filters] if filters else [])]
    try:
        data: bytes = xobject.get_data()
    except Exception as error:  # noqa: BLE001  (pypdf meets broken streams with many kinds of exception)
        raise DocumentParseError(PDF, f"an image is damaged ({error_summary(error)})") from None
    if names and names[-1] == "/DCTDecode":
        return PageImage(data, ".jpg")
    if names and names[-1] == "/JPXDecode":
        return PageImage(data, ".jp2")
    width, height = int(xobject.get("/Width", 0)), int(xobject.get("/Height", 0))
    bits = int(xobject.get("/BitsPerComponent", 8))
    components = _components(xobject.get("/ColorSpace"))
    kind = f"{'/'.join(names) or 'raw'} {components or '?'}x{bits}-bit"
    if (
        width <= 0
        or height <= 0
        or components not in (1, 3)
        or bits not in (1, 8)
        or names[-1:] == ["/JBIG2Decode"]
    ):
        return kind
    if bits == 1 and components == 1:
        # PBM's 1 is black, a DeviceGray sample's 1 white: invert every bit (rows are byte-padded in both).
        row = (width + 7) // 8
        if len(data) < row * height:
            return kind
        return PageImage(
            b"P4\n%d %d\n" % (width, height) + bytes(b ^ 0xFF for b in data[: row * height]), ".pbm"
        )
    if bits != 8 or len(data) < width * height * components:
        return kind
    magic = b"P5" if components == 1 else b"P6"
    header = magic + b"\n%d %d\n255\n" % (width, height)
    return PageImage(header + data[: width * height * components], ".pgm" if components == 1 else ".ppm")


def _components(space: Any) -> int | None:
    """Colour components of a DeviceGray, DeviceRGB or ICCBased colour space; None for any other."""
    space = space.get_object() if hasattr(space, "get_object") else space
    if space in ("/DeviceGray", "/CalGray"):
        return 1
    if space in ("/DeviceRGB", "/CalRGB"):
        return 3
    if isinstance(space, list) and space and space[0] == "/ICCBased":
        components = int(space[1].get_object().get("/N", 0))
        return components if components in (1, 3) else None
    return None
