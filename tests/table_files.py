"""Spreadsheet-shaped exports for the table tests, made here (no network): each has the shape of a real
file users load, with none of a corpus's `text` column.

- `debian_csv`: the columns and dates of distro-info-data's debian.csv (empty cells where a release has
  no such date yet);
- `grants_export`: a public-spending export as European offices write it: UTF-8 with a BOM, `;` between
  cells, CRLF line ends, amounts with thousands separators, quoted cells holding `;` and line breaks;
- `wide_csv`: more columns than a document's metadata holds.
"""

from __future__ import annotations

DEBIAN_HEADER = "version,codename,series,created,release,eol,eol-lts,eol-elts"
DEBIAN_ROWS = (
    "1.1,Buzz,buzz,1993-08-16,1996-06-17,1997-06-05,,",
    "2.0,Hamm,hamm,1996-09-12,1998-07-24,2000-03-09,,",
    "3.0,Woody,woody,2000-08-15,2002-07-19,2006-06-30,,",
    "4.0,Etch,etch,2005-06-06,2007-04-08,2010-02-15,,",
    "6.0,Squeeze,squeeze,2009-02-14,2011-02-06,2014-05-31,2016-02-29,",
    "8,Jessie,jessie,2013-05-04,2015-04-26,2018-06-17,2020-06-30,2025-06-30",
    "10,Buster,buster,2017-06-17,2019-07-06,2022-09-10,2024-06-30,2029-06-30",
    "11,Bullseye,bullseye,2019-07-06,2021-08-14,2024-08-14,2026-08-31,2031-06-30",
    "12,Bookworm,bookworm,2021-08-14,2023-06-10,2026-06-10,2028-06-30,2033-06-30",
    "13,Trixie,trixie,2023-06-10,2025-08-09,,,",
    ",Sid,sid,1993-08-16,,,,",
)
GRANTS_HEADER = ("Grant ID", "Programme", "Region", "Beneficiary", "Amount (EUR)", "Year", "Summary")
REGIONS = ("Bayern", "Hessen", "Sachsen", "Bremen", "Berlin")


def debian_csv() -> bytes:
    """distro-info-data's debian.csv in shape: version first, empty end-of-life cells, no text column."""
    return ("\n".join([DEBIAN_HEADER, *DEBIAN_ROWS]) + "\n").encode()


def grants_export(rows: int) -> bytes:
    """A `;`-separated export of `rows` grants with a BOM and CRLF; row i has Grant ID `G-<i:05>`, an
    amount like `1.234.567` (German thousands separators), and every 7th a summary of two lines."""
    lines = [";".join(GRANTS_HEADER)]
    for i in range(rows):
        amount = f"{(i * 7919) % 2_000_000 + 1_000:,}".replace(",", ".")
        summary = f'"Funding round {i % 12 + 1}; renewal"'
        if i % 7 == 0:
            summary = f'"Funding round {i % 12 + 1}; first year\r\nsecond line of note {i}"'
        region = REGIONS[i % len(REGIONS)]
        lines.append(f"G-{i:05};Digital schools;{region};School no. {i};{amount};{2015 + i % 10};{summary}")
    return b"\xef\xbb\xbf" + ("\r\n".join(lines) + "\r\n").encode("utf-8")


def wide_csv(columns: int, rows: int = 2) -> bytes:
    """A CSV of `columns` columns `c01`, `c02`... whose cell in row r is `r<r>c<column>`."""
    header = ",".join(f"c{c:02}" for c in range(1, columns + 1))
    body = [",".join(f"r{r}c{c}" for c in range(1, columns + 1)) for r in range(1, rows + 1)]
    return ("\n".join([header, *body]) + "\n").encode()
