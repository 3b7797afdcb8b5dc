from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from leaderboard.accounts.forms import SignupForm, TokenForm
from leaderboard.accounts.services import do_create_token, do_revoke_token, personal_team


def signup(request: HttpRequest) -> HttpResponse:
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        personal_team(user)
        login(request, user)
        messages.success(request, f"Welcome, {user.username}!")
        return redirect("benchmarks:home")
    return render(request, "registration/signup.html", {"form": form})


@login_required
def tokens(request: HttpRequest) -> HttpResponse:
    """List the user's API tokens; a POST creates one and shows its key once."""
    form = TokenForm(request.POST or None)
    new_key = None
    if request.method == "POST" and form.is_valid():
        days = form.cleaned_data["expires_days"]
        expires_at = timezone.now() + timedelta(days=days) if days else None
        new_key = do_create_token(request.user, name=form.cleaned_data["name"], expires_at=expires_at)
        form = TokenForm()
    context = {"form": form, "new_key": new_key,
               "tokens": request.user.api_tokens.order_by("-created_at")}
    return render(request, "accounts/tokens.html", context)


@login_required
@require_POST
def revoke_token(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(request.user.api_tokens, pk=pk)
    do_revoke_token(token)
    messages.success(request, f"Token {token} revoked.")
    return redirect("accounts:tokens")
