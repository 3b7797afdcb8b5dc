from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import UserCreationForm

from leaderboard.accounts.models import Membership


class SignupForm(UserCreationForm):
    email = forms.EmailField(required=False, help_text="For password resets, scoring notifications and the "
                                                       "benchmarks that ask for a verified address: we mail a "
                                                       "link to verify it.")

    class Meta(UserCreationForm.Meta):
        fields = ("username", "email")

    def clean_email(self) -> str:
        from leaderboard.accounts.emails import normalized

        return normalized(self.cleaned_data["email"])


class EmailForm(forms.Form):
    email = forms.EmailField(required=False, label="E-mail address",
                             help_text="A new address gets a link to verify it; empty removes it.")


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, required=False)
    expires_days = forms.IntegerField(min_value=1, max_value=3650, required=False,
                                      help_text="Leave empty for a token that does not expire.")


class TeamForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="Your lab or group, as shown on the leaderboard.")


class AddMemberForm(forms.Form):
    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=Membership.Role.choices, initial=Membership.Role.MEMBER)

    def clean_username(self):
        user = get_user_model().objects.filter(username=self.cleaned_data["username"]).first()
        if user is None:
            raise forms.ValidationError("No user with this name.", code="unknown_user")
        return user
