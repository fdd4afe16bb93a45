"""Knowledge from files (docs/ai.md "Knowledge", issue 36 item 5): an agent's document may be sent
as HTML (`"html"`) or as a PDF (`"pdf"`, base64, up to 8 MiB). carecrm keeps the text extracted
from it (libxml2, Poppler), with headings (h1-h6, a PDF's short title lines) and pages (a page
that opens without a heading) as the titles its passages are searched under, and answers from it
like from any text. The PDFs are made here with ReportLab (Debian's python3-reportlab): text
pages, a page of drawing only, an encrypted one. What cannot be read (not base64, not a PDF,
encrypted, no text, too large, two contents at once) is a 422 at its field, and nothing is
stored."""
import base64
import io
import os

import pytest
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas

import crm

PARKING_Q = "Where can patients park?"
PARKING = "Patients park for free in the garage on Rua Augusta, level 2."
HOURS = "We are open from Monday to Friday, from 7:00 to 19:00."
VACCINE_Q = "Quanto custa a vacina da gripe?"
VACCINE = "A vacina da gripe custa R$ 130 por dose."


def make_pdf(pages: list[list[tuple[str, str]]], encrypt: str | None = None,
             drawing_only: bool = False) -> bytes:
    """A PDF of `pages`, each a list of (kind, text) lines: kind "h" a heading (bold, larger),
    "p" a line of body text."""
    out = io.BytesIO()
    c = canvas.Canvas(out, pagesize=A4, encrypt=encrypt)
    for lines in pages:
        y = 780
        if drawing_only:
            c.rect(100, 500, 200, 100, fill=1)
        for kind, text in lines:
            c.setFont("Helvetica-Bold" if kind == "h" else "Helvetica", 16 if kind == "h" else 11)
            c.drawString(72, y, text)
            y -= 28 if kind == "h" else 16
        c.showPage()
    c.save()
    return out.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


GUIDE = [
    [("h", "Opening hours"), ("p", HOURS), ("p", "On Saturdays we open from 8:00 to 12:00.")],
    [("p", "The clinic has its own garage."), ("p", PARKING)],
]


@pytest.fixture
def agent(client, admin) -> dict:
    return crm.create_agent(client, admin)


def post(client, token, agent_id, body) -> crm.Response:
    return client.post(crm.knowledge_url(agent_id), body, token=token)


def documents(client, token, agent_id) -> list[dict]:
    return crm.assert_json_response(client.get(crm.knowledge_url(agent_id), token=token),
                                    200)["items"]


def test_a_pdf_is_read_page_by_page_and_answers_questions(client, admin, agent):
    aid = agent["id"]
    resp = post(client, admin, aid, {"title": "Clinic guide", "pdf": b64(make_pdf(GUIDE))})
    doc = crm.assert_json_response(resp, 201)
    crm.assert_document(doc, agent_id=aid, title="Clinic guide", kind="pdf")
    assert doc["passage_count"] >= 4, doc
    full = crm.assert_json_response(client.get(crm.document_url(aid, doc["id"]), token=admin), 200)
    crm.assert_document(full, "text", kind="pdf")
    # The heading of page 1, and page 2 (no heading of its own) by its number.
    assert "# Opening hours" in full["text"] and "# Page 2" in full["text"], full["text"]
    assert PARKING in full["text"] and HOURS in full["text"], full["text"]
    assert doc["bytes"] == len(full["text"].encode()), (doc, full)
    a = crm.chat(client, admin, aid, PARKING_Q)
    assert a["handoff"] is False and "Rua Augusta, level 2" in a["answer"], a
    assert a["passages"][0]["document_id"] == doc["id"], a
    crm.assert_grounded(a["answer"], a["passages"])
    a = crm.chat(client, admin, aid, "What time do you open on Saturdays?")
    assert "8:00 to 12:00" in a["answer"], a


def test_an_html_page_is_read_without_its_scripts_and_answers_questions(client, admin, agent):
    aid = agent["id"]
    html = ("<!doctype html><html><head><title>FAQ</title><script>var secret = 'XSS-42';"
            "</script></head><body><nav>Home | Contact</nav><h2>Vacinas</h2>"
            f"<p>{VACCINE}</p><p>Aplicamos de segunda a sexta, das 8h &agrave;s 17h.</p>"
            "<h2>Estacionamento</h2><ul><li>As primeiras 2 horas s&atilde;o gr&aacute;tis.</li>"
            "<li>Depois, R$&nbsp;8 por hora.</li></ul><style>.x{}</style></body></html>")
    doc = crm.assert_json_response(post(client, admin, aid, {"title": "FAQ", "html": html}), 201)
    crm.assert_document(doc, agent_id=aid, kind="html")
    full = crm.assert_json_response(client.get(crm.document_url(aid, doc["id"]), token=admin), 200)
    assert "XSS-42" not in full["text"] and ".x{}" not in full["text"], full["text"]
    assert "# Vacinas" in full["text"] and "das 8h às 17h" in full["text"], full["text"]
    a = crm.chat(client, admin, aid, VACCINE_Q)
    assert a["handoff"] is False and "R$ 130" in a["answer"], a
    a = crm.chat(client, admin, aid, "O estacionamento é grátis?")
    assert "2 horas" in a["answer"], a


def test_put_replaces_a_text_document_with_a_pdf(client, admin, agent):
    aid = agent["id"]
    doc = crm.add_document(client, admin, aid, "Guide", text="We have no parking.")
    resp = client.put(crm.document_url(aid, doc["id"]),
                      {"title": "Guide", "pdf": b64(make_pdf(GUIDE))}, token=admin)
    replaced = crm.assert_json_response(resp, 200)
    assert replaced["kind"] == "pdf" and replaced["id"] == doc["id"], replaced
    assert "Rua Augusta" in crm.chat(client, admin, aid, PARKING_Q)["answer"]


def unreadable() -> list[tuple[str, dict, str]]:
    """(name, body, words of the error) of documents that cannot be read."""
    return [
        ("not base64", {"pdf": "this is %%% not base64"}, "base64"),
        ("not a PDF", {"pdf": b64(b"hello, I am a text file")}, "not a PDF"),
        ("encrypted", {"pdf": b64(make_pdf(GUIDE, encrypt="secret"))}, "encrypted"),
        ("no text", {"pdf": b64(make_pdf([[]], drawing_only=True))}, "no text"),
        ("cut short", {"pdf": b64(make_pdf(GUIDE)[:200])}, "PDF"),
        ("empty html", {"html": "<script>only()</script>"}, "no words"),
    ]


@pytest.mark.parametrize("name,body,words", unreadable(), ids=[u[0] for u in unreadable()])
def test_what_cannot_be_read_is_a_422_at_its_field_and_stores_nothing(client, admin, agent, name,
                                                                      body, words):
    aid = agent["id"]
    before = documents(client, admin, aid)
    resp = post(client, admin, aid, {"title": name, **body})
    items = crm.validation_items(resp)
    field = next(iter(body))
    assert [i["loc"] for i in items] == [["body", field]], resp.describe()
    assert words in items[0]["msg"], resp.describe()
    assert documents(client, admin, aid) == before


def test_a_pdf_over_8_mib_and_two_contents_at_once_are_refused(client, admin, agent):
    aid = agent["id"]
    before = documents(client, admin, aid)
    big = b"%PDF-1.4\n" + os.urandom(8 * 1024 * 1024)
    items = crm.validation_items(post(client, admin, aid, {"title": "Big", "pdf": b64(big)}))
    assert [(i["loc"], i["type"]) for i in items] == [(["body", "pdf"], "string_too_long")], items
    items = crm.validation_items(post(client, admin, aid, {"title": "Two", "text": "Parking.",
                                                            "html": "<p>Parking.</p>"}))
    assert [i["loc"] for i in items] == [["body"]], items
    assert documents(client, admin, aid) == before
