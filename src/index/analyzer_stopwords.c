/*
 * analyzer_stopwords.c — built-in stop-word lists (english, german, french,
 * spanish) and elided articles (french, italian), looked up by libstemmer
 * language name or ISO 639 code.
 *
 * Layer: index/.  Calls libc only.
 *
 * The lists are written in ordinary spelling; analyzer_new folds each entry
 * with the analyzer's own settings (NFKC, case folding, optional accent
 * stripping) so they match folded tokens ("daß" and "dass" both become
 * "dass").  They hold function words only: articles, pronouns,
 * prepositions, conjunctions and forms of the commonest auxiliaries.
 * Elided French forms ("l'", "d'") are absent on purpose: the word breaker
 * keeps "l'homme" as one word, and the elision step (az_elisions_for, the
 * articles Lucene's French and Italian analyzers cut) makes it "homme".
 */
#include <stddef.h>
#include <string.h>

#include "index/analyzer_int.h"

static const char *const az_stop_english[] = {
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are",
    "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but",
    "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for",
    "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself",
    "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just",
    "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once",
    "only", "or", "other", "ought", "our", "ours", "ourselves", "out", "over", "own", "same",
    "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them",
    "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too",
    "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which",
    "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself",
    "yourselves", NULL,
};

static const char *const az_stop_german[] = {
    "aber", "alle", "allem", "allen", "aller", "alles", "als", "also", "am", "an", "ander",
    "andere", "anderem", "anderen", "anderer", "anderes", "auch", "auf", "aus", "bei", "bin",
    "bis", "bist", "da", "damit", "dann", "das", "dass", "daß", "dein", "deine", "dem", "den",
    "der", "des", "dich", "die", "dies", "diese", "diesem", "diesen", "dieser", "dieses", "dir",
    "doch", "dort", "du", "durch", "ein", "eine", "einem", "einen", "einer", "eines", "er", "es",
    "euch", "euer", "für", "hab", "habe", "haben", "hat", "hatte", "hier", "hin", "ich", "ihm",
    "ihn", "ihr", "ihre", "ihrem", "ihren", "ihrer", "im", "in", "ist", "ja", "jede", "jedem",
    "jeden", "jeder", "kann", "kein", "keine", "man", "mein", "meine", "mich", "mir", "mit",
    "nach", "nicht", "noch", "nun", "nur", "ob", "oder", "ohne", "sehr", "sein", "seine", "sich",
    "sie", "sind", "so", "soll", "um", "und", "uns", "unser", "unter", "über", "vom", "von", "vor",
    "war", "waren", "was", "weil", "welche", "wenn", "werden", "wie", "wir", "wird", "wo", "zu",
    "zum", "zur", NULL,
};

static const char *const az_stop_french[] = {
    "à", "au", "aux", "avec", "ce", "ces", "cet", "cette", "dans", "de", "des", "du", "elle",
    "elles", "en", "est", "et", "été", "être", "eu", "eux", "il", "ils", "je", "la", "le", "les",
    "leur", "leurs", "lui", "ma", "mais", "me", "même", "mes", "moi", "mon", "ne", "ni", "nos",
    "notre", "nous", "on", "ont", "ou", "où", "par", "pas", "pour", "qu", "que", "qui", "sa",
    "sans", "se", "ses", "si", "son", "sont", "sur", "ta", "te", "tes", "toi", "ton", "tu", "un",
    "une", "vos", "votre", "vous", "y", NULL,
};

static const char *const az_stop_spanish[] = {
    "a", "al", "algo", "algunas", "algunos", "ante", "antes", "como", "con", "contra", "cual",
    "cuando", "de", "del", "desde", "donde", "durante", "e", "el", "él", "ella", "ellas", "ellos",
    "en", "entre", "era", "es", "esa", "esas", "ese", "eso", "esos", "esta", "está", "estas",
    "este", "esto", "estos", "fue", "ha", "hasta", "hay", "la", "las", "le", "les", "lo", "los",
    "me", "mi", "mí", "mis", "muy", "más", "nada", "ni", "no", "nos", "nosotros", "o", "os",
    "otra", "otro", "para", "pero", "por", "porque", "que", "qué", "quien", "se", "ser", "si",
    "sí", "sin", "sobre", "son", "su", "sus", "también", "te", "ti", "todo", "todos", "tu", "tú",
    "tus", "un", "una", "uno", "unos", "y", "ya", "yo", NULL,
};

/* Language names and codes libstemmer accepts, mapped to a list. */
static const struct {
    const char *name;
    const char *const *list;
} az_stop_langs[] = {
    {"english", az_stop_english}, {"porter", az_stop_english}, {"en", az_stop_english},
    {"eng", az_stop_english},     {"german", az_stop_german},  {"de", az_stop_german},
    {"ger", az_stop_german},      {"deu", az_stop_german},     {"french", az_stop_french},
    {"fr", az_stop_french},       {"fre", az_stop_french},     {"fra", az_stop_french},
    {"spanish", az_stop_spanish}, {"es", az_stop_spanish},     {"spa", az_stop_spanish},
    {"esl", az_stop_spanish},
};

const char *const *az_stopwords_for(const char *language)
{
    if (!language)
        return NULL;
    for (size_t i = 0; i < sizeof az_stop_langs / sizeof az_stop_langs[0]; i++)
        if (strcmp(az_stop_langs[i].name, language) == 0)
            return az_stop_langs[i].list;
    return NULL;
}

/* Articles that take an apostrophe before a vowel: "l'homme", "qu'il",
 * "dell'arte", "un'altra". */
static const char *const az_elide_french[] = {
    "l", "m", "t", "qu", "n", "s", "j", "d", "c", "jusqu", "quoiqu", "lorsqu", "puisqu", NULL,
};

static const char *const az_elide_italian[] = {
    "c", "l", "all", "dall", "dell", "nell", "sull", "coll", "pell", "gl", "agl", "dagl",
    "degl", "negl", "sugl", "un", "m", "t", "s", "v", "d", NULL,
};

static const struct {
    const char *name;
    const char *const *list;
} az_elide_langs[] = {
    {"french", az_elide_french}, {"fr", az_elide_french},   {"fra", az_elide_french},
    {"fre", az_elide_french},    {"italian", az_elide_italian}, {"it", az_elide_italian},
    {"ita", az_elide_italian},
};

const char *const *az_elisions_for(const char *language)
{
    if (!language)
        return NULL;
    for (size_t i = 0; i < sizeof az_elide_langs / sizeof az_elide_langs[0]; i++)
        if (strcmp(az_elide_langs[i].name, language) == 0)
            return az_elide_langs[i].list;
    return NULL;
}
