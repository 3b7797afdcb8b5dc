"""The API's error codes of participation (``gate``): what each means, for the OpenAPI document.
Imports nothing, so that ``leaderboard.api_errors`` can list them."""

CODES = {
    "banned": "A maintainer banned you from the benchmark (or staff from every benchmark); the message says "
              "why",
    "email_domain_not_allowed": "The benchmark accepts addresses at some domains only, or refuses yours; the "
                                "message names them",
    "email_not_verified": "The benchmark asks for a verified e-mail address; the message says where to verify "
                          "yours",
    "terms_not_accepted": "Accept the benchmark's terms of use first: error.terms_url shows them, "
                          "POST /api/v1/benchmarks/<track>/participation with {\"accept_terms\": "
                          "error.terms_version} (or `lb participate <track>`) accepts them",
    "participation_pending": "The benchmark's maintainers approve each participant: the request waits (or "
                             "was not made yet)",
    "participation_denied": "The maintainers denied the request, or the benchmark takes invited users only",
    "terms_version_mismatch": "The terms' version given is not the current one: read them again "
                              "(error.terms_url) and accept error.terms_version",
}
