from django import forms
from django.contrib.auth.forms import UserCreationForm


class SignupForm(UserCreationForm):
    email = forms.EmailField(required=False, help_text="For notifications and password resets.")

    class Meta(UserCreationForm.Meta):
        fields = ("username", "email")


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, required=False)
    expires_days = forms.IntegerField(min_value=1, max_value=3650, required=False,
                                      help_text="Leave empty for a token that does not expire.")
