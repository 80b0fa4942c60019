"""The fixed vocabulary tables the generator draws from: classes, the ladder, read-tool names, record-id words.

Everything here is data. Its bytes are part of the generator hash and the vocabulary hash, so an edit
is a new instrument.
"""

from __future__ import annotations

CLASSES: tuple[str, ...] = (
    "invoice", "payment", "budget", "shipment", "contract", "voucher",
    "claim", "order", "permit", "grant", "lease", "refund",
)

LADDER: tuple[str, ...] = (
    "review", "sample", "measure", "monitor", "compare", "bundle", "route", "label",
)

READ_VERBS: tuple[str, ...] = (
    "lookup", "scan", "fetch", "list", "query", "check", "count", "inspect",
    "describe", "browse", "find", "peek", "tally", "probe", "survey", "search",
)

READ_NOUNS: tuple[str, ...] = (
    "region", "capacity", "vendor", "currency", "calendar", "holiday", "warehouse", "carrier",
    "tariff", "quota", "office", "branch", "supplier", "channel", "segment", "catalog",
)

# Field names the arguments knob adds to stage calls; each is carried by no tool name.
EXTRA_FIELDS: tuple[str, ...] = (
    "cost_center", "batch_ref", "approver", "period", "site_code", "priority",
)

# Filler sentences a control arm may append to the system prompt to match a higher arm's length.
FILLER_SENTENCES: tuple[str, ...] = (
    "Notes for the operator follow and change nothing about the task.",
    "The ledger keeps an audit trail of every call.",
    "Calls are processed one at a time in the order they arrive.",
    "Records carry stages from zero up to eight.",
    "A status word and a payload come back with every call.",
    "Catalogue tools answer questions and never change a record.",
    "Tokens are case sensitive hexadecimal strings.",
    "The operator reviews the ledger at the end of the session.",
)

# Record-id words of the eval split; disjoint from TRAIN_WORDS and from every tool name.
EVAL_WORDS: tuple[str, ...] = (
    "vuvam", "tubar", "venul", "duzik", "punes", "durar", "funer", "tukir", "mimin", "nogor",
    "ladon", "madis", "degir", "banen", "rikes", "miler", "ladas", "ketur", "pebek", "ludom",
    "zakar", "lomam", "zuter", "gubon", "podek", "pasum", "devan", "perus", "zazis", "kopok",
    "rosar", "lugar", "tazim", "botal", "veven", "gefes", "gomen", "lafam", "pagis", "tozon",
    "fifis", "kazum", "bosin", "didum", "dazes", "level", "tegik", "nadum", "dakuk", "nosar",
    "rulum", "rolin", "pepos", "ludin", "matus", "kepom", "mumes", "zupir", "rugam", "gubin",
    "muger", "sezus", "pezen", "manum", "modes", "fetok", "tanum", "sopin", "gorul", "peduk",
    "vogun", "kemum", "vivem", "ledak", "dimor", "bisan", "futas", "delak", "ginur", "buzok",
    "zuzum", "golal", "gumos", "kigin", "goves", "kotul", "ralin", "nuvak", "gomam", "rulir",
    "zeder", "gesis", "vufer", "komas", "bazem", "tukok", "kopum", "vafus", "votus", "reden",
    "rarok", "zaron", "dusam", "sifus", "nuvok", "suzor", "dager", "sufum", "gevak", "zepum",
    "lemol", "pobum", "zobin", "vivol", "zalor", "kunil", "lobos", "devum", "purim", "bilil",
    "mudil", "totim", "nigum", "feron", "dinam", "nulil", "mepun", "vezar", "pigan", "zonok",
    "figor", "kilan", "zumum", "ralan", "tapok", "lupak", "koben", "fubim", "tilen", "vivin",
    "vusir", "vebim", "gefur", "gitis", "vitir", "medak", "merel", "firar", "nipil", "ziner",
    "zezar", "tuden", "gedir", "vasin", "zukal", "tusal", "bidul", "barun", "pigem", "kipes",
    "fudes", "vinom", "vatos", "sabor", "tukim", "sagim", "nusus", "pasim", "gudik", "patek",
    "ropun", "bekom", "sosam", "rasak", "tanur", "tigil", "bulal", "ferun", "kupel", "fages",
    "difok", "zivos", "zorem", "kison", "sekun", "pegol", "ninim", "sibil", "vaser", "pulal",
    "zimak", "vazel", "momam", "fovem", "lemus", "banil", "sumim", "detas", "muzis", "dorom",
    "telel", "vutun", "visar", "tilos", "zuzor", "tusam", "bilom", "vuker", "sulem", "lebel",
    "vuver", "panok", "nanes", "fezul", "gabuk", "kumom", "zafis", "zosok", "mopim", "bodir",
    "verim", "lakur", "gizak", "baval", "korek", "tuzem", "morin", "veges", "biman", "birar",
    "rekok", "vebok", "dinen", "ziton", "gukul", "varol", "tazor", "daluk", "kason", "borur",
    "rifem", "nozas", "rovon", "vitum", "lalis", "mopas", "numis", "puzan", "fizil", "tipen",
    "zodim", "nepem", "fivin", "sobim", "zelis", "guval",
)

# Record-id words of the train split.
TRAIN_WORDS: tuple[str, ...] = (
    "tudok", "fatar", "dufem", "peter", "vukil", "sikak", "fevok", "folal", "nebus", "fatus",
    "pibur", "deduk", "lisin", "furur", "gufon", "rakes", "gasol", "nuser", "taren", "bufil",
    "nobam", "rumas", "levom", "segok", "mefol", "pizis", "motor", "fipul", "razir", "sedun",
    "ginun", "fosan", "pifas", "kizan", "meden", "dipes", "lamen", "vatol", "kosim", "kokum",
    "lomem", "vaves", "mibol", "tamen", "bugol", "motar", "sezis", "domuk", "pabom", "nubos",
    "gagir", "vozin", "masir", "zelek", "dupam", "vobol", "buvem", "milar", "bemin", "lonir",
    "toses", "zapin", "vegok", "turim", "lagal", "tugim", "zulil", "degak", "vanek", "gosim",
    "daler", "gipos", "pefor", "rubor", "pigik", "zizos", "belas", "fozes", "malur", "gesan",
    "pidam", "midos", "penen", "bofol", "lolun", "sozen", "durom", "kures", "zadar", "bolis",
    "vatun", "vanol", "zubas", "runus", "fodik", "vugir", "lavan", "kifok", "pubik", "roler",
    "rukur", "tegen", "fuges", "nasul", "nepek", "kigos", "malal", "tisan", "rekel", "sefal",
    "dokun", "gobom", "libar", "zaful", "nebul", "numun", "pizes", "lobal", "ramis", "tutor",
    "dolim", "rapul", "deros", "vokik", "salom", "pivos", "katun", "fuvul", "kekir", "tobel",
    "kasul", "favir", "miluk", "domol", "kitom", "palor", "pekun", "resuk", "lipes", "fobul",
    "nagem", "tozim", "dokik", "fekik", "dogok", "sifir", "ladok", "tapil", "bapak", "relol",
    "zefan", "fefan", "demos", "fimok", "sanin", "bufer", "burok", "sitin", "depem", "volan",
    "fires", "zeril", "gegim", "zomon", "gebam", "liter", "duter", "gafak", "karon", "fepir",
    "kidor", "lapis", "nofur", "metal", "vanom", "madum", "bikol", "kekek", "sagas", "rifil",
    "mazol", "ripil", "nidan", "zafak", "bipes", "leman", "tudus", "nevin", "gurol", "zatek",
    "vanur", "dozem", "gukol", "sidus", "larom", "gosal", "rebim", "ginak", "dizus", "lokun",
    "nesok", "kolis", "sosin", "pezek", "kurol", "vudok", "bakul", "pekam", "bafik", "konal",
    "vunek", "gizuk", "mitil", "kamim", "kenas", "bamur", "mavam", "sekus", "sesuk", "godal",
    "bekek", "dokem", "sorer", "vuson", "verin", "dudus", "manik", "motos", "salir", "sotin",
    "kokon", "ziram", "fomak", "geran", "burom", "rimil", "ramik", "diver", "rekim", "berur",
    "kedan", "sivin", "pokem", "sivek", "lopom", "linon", "vetak", "mavos", "toger", "megil",
    "rovuk", "bagan", "bavon", "nikar", "vikil", "dufur",
)
