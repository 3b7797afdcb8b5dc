from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model, login
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from leaderboard.accounts import emails
from leaderboard.accounts.auth import api_auth
from leaderboard.accounts.forms import AddMemberForm, EmailForm, SignupForm, TeamForm, TokenForm
from leaderboard.accounts.models import Membership, Team
from leaderboard.accounts.services import (
    TeamError,
    check_add_member,
    check_remove_member,
    do_create_team,
    do_create_token,
    do_revoke_token,
    is_team_owner,
    personal_team,
)

log = logging.getLogger(__name__)


def signup(request: HttpRequest) -> HttpResponse:
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        personal_team(user)
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        messages.success(request, f"Welcome, {user.username}!")
        if user.email:
            _mail_link(request, lambda: emails.do_send_verification(user, _base(request)))
        return redirect("benchmarks:home")
    return render(request, "registration/signup.html", {"form": form})


def _base(request: HttpRequest) -> str:
    return request.build_absolute_uri("/")


def _mail_link(request: HttpRequest, send: Callable[[], object]) -> None:
    """Mail a verification link and say so; a refusal or a mail server that fails is said instead."""
    try:
        send()
    except emails.EmailError as exc:
        messages.error(request, str(exc))
    except OSError:
        log.exception("Could not mail a verification link to %s", request.user)
        messages.error(request, "The verification link could not be mailed (the mail server failed); ask for "
                                "it again later on your e-mail page.")
    else:
        messages.info(request, f"We mailed a link to {request.user.email}: open it to verify your address "
                               f"(within {settings.EMAIL_VERIFY_MAX_AGE_HOURS} hours).")


@login_required
def email(request: HttpRequest) -> HttpResponse:
    """The account's address and whether it is verified; change it, or have the link mailed again."""
    form = EmailForm(request.POST or None, initial={"email": request.user.email})
    if request.method == "POST" and request.POST.get("action") == "resend":
        _mail_link(request, lambda: emails.do_send_verification(request.user, _base(request)))
        return redirect("accounts:email")
    if request.method == "POST" and form.is_valid():
        new = emails.normalized(form.cleaned_data["email"])
        if new != emails.normalized(request.user.email):
            try:
                mailed = emails.do_change_email(request.user, new, _base(request))
            except emails.EmailError as exc:
                form.add_error("email", str(exc))
            except OSError:
                log.exception("Could not mail a verification link to %s", request.user)
                messages.error(request, f"Your address is now {new}, but the link could not be mailed (the mail "
                                        "server failed); ask for it again later.")
                return redirect("accounts:email")
            else:
                if mailed:
                    messages.info(request, f"We mailed a link to {new}: open it to verify your address (within "
                                           f"{settings.EMAIL_VERIFY_MAX_AGE_HOURS} hours).")
                else:
                    messages.success(request, f"Your address is now {new or 'none'}.")
                return redirect("accounts:email")
        else:
            return redirect("accounts:email")
    return render(request, "accounts/email.html", {"form": form, "verified": emails.is_verified(request.user)})


def verify_email(request: HttpRequest, token: str) -> HttpResponse:
    """A link mailed to an address: a page that confirms it (a POST, so that a mail scanner opening the
    link verifies nothing by itself)."""
    try:
        found = emails.read_token(token)
        if request.method == "POST":
            emails.do_verify(token)
            messages.success(request, f"{found.email} is verified.")
            return redirect("accounts:email" if request.user.is_authenticated else "benchmarks:home")
    except emails.EmailError as exc:
        return render(request, "accounts/verify_email.html", {"problem": str(exc)}, status=400)
    return render(request, "accounts/verify_email.html", {"email": found.email, "username": found.user.get_username()})


@login_required
def tokens(request: HttpRequest) -> HttpResponse:
    """List the user's API tokens; a POST creates one and shows its key once."""
    form = TokenForm(request.POST or None)
    new_key, status = None, 200
    if request.method == "POST" and form.is_valid():
        # Revoked tokens count too, so that creating and revoking cannot go round the cap.
        recent = request.user.api_tokens.filter(created_at__gte=timezone.now() - timedelta(hours=1)).count()
        if recent >= settings.TOKENS_PER_HOUR:
            form.add_error(None, f"You created {recent} API tokens in the last hour; at most "
                                 f"{settings.TOKENS_PER_HOUR} an hour are allowed. Try again later.")
            status = 429
        else:
            days = form.cleaned_data["expires_days"]
            expires_at = timezone.now() + timedelta(days=days) if days else None
            new_key = do_create_token(request.user, name=form.cleaned_data["name"], expires_at=expires_at)
            form = TokenForm()
    context = {"form": form, "new_key": new_key,
               "tokens": request.user.api_tokens.order_by("-created_at")}
    return render(request, "accounts/tokens.html", context, status=status)


@login_required
@require_POST
def revoke_token(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(request.user.api_tokens, pk=pk)
    do_revoke_token(token)
    messages.success(request, f"Token {token} revoked.")
    return redirect("accounts:tokens")


@login_required
def teams(request: HttpRequest) -> HttpResponse:
    """The user's teams; a POST creates one."""
    personal_team(request.user)
    form = TeamForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            team = do_create_team(request.user, form.cleaned_data["name"])
        except TeamError as exc:
            form.add_error("name", str(exc))
        else:
            messages.success(request, f"Created team {team.name}.")
            return redirect("accounts:team", slug=team.slug)
    memberships = Membership.objects.filter(user=request.user).select_related("team").order_by(
        "-team__is_personal", "team__name")
    return render(request, "accounts/teams.html", {"form": form, "memberships": memberships})


@login_required
def team(request: HttpRequest, slug: str) -> HttpResponse:
    team = get_object_or_404(Team, slug=slug, members=request.user)
    form = AddMemberForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            check_add_member(request.user, team, form.cleaned_data["username"], form.cleaned_data["role"])
        except TeamError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Added {form.cleaned_data['username'].username} to {team.name}.")
            return redirect("accounts:team", slug=slug)
    members = Membership.objects.filter(team=team).select_related("user").order_by("role", "user__username")
    return render(request, "accounts/team.html", {"team": team, "form": form, "members": members,
                                                  "is_owner": is_team_owner(request.user, team)})


@login_required
@require_POST
def remove_member(request: HttpRequest, slug: str, user_id: int) -> HttpResponse:
    team = get_object_or_404(Team, slug=slug, members=request.user)
    user = get_object_or_404(get_user_model(), pk=user_id, teams=team)
    try:
        check_remove_member(request.user, team, user)
    except TeamError as exc:
        messages.error(request, str(exc))
        return redirect("accounts:team", slug=slug)
    if user == request.user:
        messages.success(request, f"You left {team.name}.")
        return redirect("accounts:teams")
    messages.success(request, f"Removed {user.get_username()} from {team.name}.")
    return redirect("accounts:team", slug=slug)


@api_auth()
def api_me(request: HttpRequest) -> JsonResponse:
    """Who the token belongs to and their teams (``lb login`` checks a token with it)."""
    personal_team(request.user)
    memberships = Membership.objects.filter(user=request.user).select_related("team").order_by("team__name")
    return JsonResponse({"username": request.user.get_username(), "email": request.user.email,
                         "email_verified": emails.is_verified(request.user),
                         "teams": [{"slug": m.team.slug, "name": m.team.name, "personal": m.team.is_personal,
                                    "role": m.role} for m in memberships]})
