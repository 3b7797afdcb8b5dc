from django.urls import path

from leaderboard.accounts import views

app_name = "accounts"
urlpatterns = [
    path("signup/", views.signup, name="signup"),
    path("email/", views.email, name="email"),
    path("email/verify/<str:token>/", views.verify_email, name="verify_email"),
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", views.revoke_token, name="revoke_token"),
    path("teams/", views.teams, name="teams"),
    path("teams/<slug:slug>/", views.team, name="team"),
    path("teams/<slug:slug>/members/<int:user_id>/remove/", views.remove_member, name="remove_member"),
]
